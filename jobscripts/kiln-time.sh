# Shared by kiln's jobscripts (sourced): the time-limit stop. Slurm sends the
# --signal=B:USR1@MARGIN signal MARGIN seconds before the limit, or at once when
# the limit is shorter than MARGIN (a 2-minute test job under the default 300 s
# margin would be stopped a few seconds in, every attempt).

# Seconds in a Slurm duration: D-HH:MM:SS, HH:MM:SS, MM:SS or SS; empty when
# it is none of these (UNLIMITED, NOT_SET).
kiln_seconds() {
  local text=$1 days=0 h=0 m=0 s=0
  [[ $text =~ ^([0-9]+)-(.*)$ ]] && { days=${BASH_REMATCH[1]}; text=${BASH_REMATCH[2]}; }
  if [[ $text =~ ^([0-9]+):([0-9]+):([0-9]+)$ ]]; then h=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
  elif [[ $text =~ ^([0-9]+):([0-9]+)$ ]]; then m=${BASH_REMATCH[1]} s=${BASH_REMATCH[2]}
  elif [[ $text =~ ^([0-9]+)$ ]]; then s=${BASH_REMATCH[1]}
  else return 0; fi
  echo $(( 10#$days * 86400 + 10#$h * 3600 + 10#$m * 60 + 10#$s ))
}

# When the stop signal came `used` seconds into the attempt with `left`
# seconds to the limit: empty to stop now (the usual case), or the seconds to
# wait before stopping when the signal came at once because the limit is
# shorter than the margin (in the first 30 s, over a minute left); then kiln
# stops max(20 s, a tenth of what is left) before the limit.
kiln_stop_delay() {
  local used=$1 left=$2
  [ -n "$left" ] && [ "$used" -lt 30 ] && [ "$left" -gt 60 ] || return 0
  local keep=$(( left / 10 > 20 ? left / 10 : 20 ))
  echo $(( left - keep ))
}
