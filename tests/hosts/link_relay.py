#!/usr/bin/env python3
"""An emulated host's link as a user-space relay (this kernel has no netem): a tap device "eth0" in the host's
network namespace and a tap device PORT in the switch's, and this process forwarding the frames between them,
each after DELAY milliseconds and each dropped with probability LOSS, both read from CONTROL ("DELAY LOSS",
e.g. "50 0.05") whenever it changes. The link exists while this process does.

    link_relay.py HOST_PID SWITCH_NETNS PORT CONTROL

Prints "ready" once both devices exist (the caller then gives them addresses and a bridge)."""
import ctypes
import fcntl
import heapq
import os
import random
import select
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
libc = ctypes.CDLL(None, use_errno=True)


def enter_netns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            sys.exit(f"link_relay: setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def read_control(path, current):
    try:
        delay_ms, loss = open(path).read().split()[:2]
        return float(delay_ms) / 1000.0, float(loss)
    except (OSError, ValueError):
        return current


def main():
    host_pid, switch, port, control = sys.argv[1:5]
    enter_netns(f"/proc/{host_pid}/ns/net")
    host_side = tap("eth0")
    enter_netns(f"/var/run/netns/{switch}")
    switch_side = tap(port)
    print("ready", flush=True)
    peer = {host_side: switch_side, switch_side: host_side}
    delay, loss = read_control(control, (0.0, 0.0))
    checked = time.monotonic()
    pending = []  # (due, sequence, destination, frame): a constant delay keeps each direction in order
    sequence = 0
    while True:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, destination, frame = heapq.heappop(pending)
            try:
                os.write(destination, frame)
            except OSError:
                pass  # the other side is down (a cut port): the frame is lost, as on a wire
        timeout = min(0.5, max(0.0, pending[0][0] - now)) if pending else 0.5
        readable, _, _ = select.select([host_side, switch_side], [], [], timeout)
        for source in readable:
            while True:
                try:
                    frame = os.read(source, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    break
                if loss > 0 and random.random() < loss:
                    continue
                sequence += 1
                heapq.heappush(pending, (time.monotonic() + delay, sequence, peer[source], frame))
        if time.monotonic() - checked > 0.5:
            delay, loss = read_control(control, (delay, loss))
            checked = time.monotonic()


if __name__ == "__main__":
    main()
