#!/usr/bin/env python3
"""The rules of victims.py on log excerpts of the kinds kiln and Open MPI print (no kiln run needed). Pass: every
check below holds, then "VICTIMS RULES OK". A rank that ended alone without an injected exception is no victim; an
injected exception's rank is; ranges of the survivors event parse; a crash whose frames run through Open MPI's
shrink and no kiln frame is Open MPI's, one with a kiln frame is kiln's."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import victims  # noqa: E402

log = """\
[rank 2 on vm]: fault injection: killing this process (SIGKILL) at step 5 in sums
[rank 3 on vm]: fault injection: stopping this process (SIGSTOP) at step 6 in forward
kiln: error on rank 5 (vm): fault injection: an exception from outside kiln at step 4 in backward
kiln: rank 5 ends alone; the job goes on without its node
kiln: error on rank 6 (vm): units [2, 4) are not within the held [0, 2)
kiln: rank 6 ends alone; the job goes on without its node
[rank 9 on vm]: fault injection: killing this process (SIGKILL) at step 0 in ready
kiln: rank 1 (vm): taking the admitted processes in made no progress for 60 s (MPI_Comm_spawn, MPI_Init and the connect
"""
chosen = victims.chosen_in(log)
# rank 6 ended alone on kiln's own error: collateral, not a victim; rank 9 was killed before it joined the job (never
# a member); rank 1 was ended by the admission's deadline, as a schedule that kills a peer during the connect wants.
assert chosen == {1, 2, 3, 5}, chosen

assert victims.parse_ranges("0-1,4,6-7") == {0, 1, 4, 6, 7}
assert victims.parse_ranges("") == set()

openmpi = """\
[vm:100] *** Process received signal ***
[vm:100] Signal: Segmentation fault (11)
[vm:100] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3bfd0)[0x7f]
[vm:100] [ 1] /home/me/kiln/.deps/ompi/lib/libmpi.so.40(ompi_comm_revoke_local+0x20)[0x7f]
[vm:100] [ 2] /home/me/kiln/.deps/ompi/lib/libmpi.so.40(ompi_comm_activate+0x90)[0x7f]
[vm:100] [ 3] /home/me/kiln/.deps/ompi/lib/libmpi.so.40(MPIX_Comm_shrink+0x40)[0x7f]
[vm:100] *** End of error message ***
"""
ours = """\
[vm:101] *** Process received signal ***
[vm:101] Signal: Segmentation fault (11)
[vm:101] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x3bfd0)[0x7f]
[vm:101] [ 1] /build/kiln_torch.so(_ZN4kiln5train10layerStateERNS_5model3GptERNS0_5AdamWEj+0x1c)[0x7f]
[vm:101] [ 2] /home/me/kiln/.deps/ompi/lib/libmpi.so.40(PMPI_Recv+0x10)[0x7f]
[vm:101] *** End of error message ***
"""
stacks = victims.crash_stacks(openmpi + ours)
assert len(stacks) == 2, stacks
assert stacks[0][0].startswith("Signal: Segmentation fault"), stacks[0]
assert victims.runtime_crash(stacks[0]) and not victims.runtime_crash(stacks[1]), stacks
print("VICTIMS RULES OK")
