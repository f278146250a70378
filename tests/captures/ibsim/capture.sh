#!/usr/bin/env bash
# Re-creates the raw captures in this folder from a simulated fabric (ibsim-utils 0.10,
# opensm 3.3.23, infiniband-diags 44.0 on Debian). Run from any directory, as any user:
#     tests/captures/ibsim/capture.sh OUTDIR
# It starts its own ibsim (own IBSIM_SOCKNAME, so it does not disturb another one) and opensm in
# a temp dir, runs the tools, and stops both by PID. See SOURCES.md for what each file is.
set -euo pipefail
out="$(realpath "${1:?usage: capture.sh OUTDIR}")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
export PATH="$PATH:/usr/sbin:/sbin" IBSIM_SOCKNAME="ibdiag-capture-$$" OSM_CACHE_DIR="$work/cache"
mkdir -p "$out" "$OSM_CACHE_DIR"
cd "$work"
cp "$here/capture.net" net
printf 'force_link_speed 0\nforce_link_speed_ext 0\nforce_link_width 0\n' >opensm.conf
mkfifo console
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
exec 3<>console # held open read-write: ibsim never sees EOF on its console
setsid ibsim -s net <console >ibsim.log 2>&1 &
pids+=($!)
# One SM per subnet: the leaf switch's subnet (attached at Hca1) and the back-to-back pair.
SIM_HOST=Hca1 setsid ibsim-run opensm -F "$work/opensm.conf" -f "$work/opensm-1.log" >/dev/null 2>&1 &
pids+=($!)
SIM_HOST=Hca4 setsid ibsim-run opensm -F "$work/opensm.conf" -f "$work/opensm-4.log" >/dev/null 2>&1 &
pids+=($!)
up() { SIM_HOST="$1" ibsim-run smpquery -C ibsim0 -P 1 -D portinfo 0 1 2>/dev/null | grep -q '^LinkState:\.*Active$'; }
for _ in $(seq 1 120); do up Hca1 && up Hca2 && up Hca3 && up Hca4 && up Hca5 && break; sleep 0.25; done
up Hca1 && up Hca4 || { echo "subnet did not come up" >&2; exit 1; }

# run NAME SIM_HOST argv... : stdout to NAME.txt, stderr to NAME.stderr (if any), rc to NAME.rc
run() {
    local name="$1" host="$2" rc=0
    shift 2
    SIM_HOST="$host" ibsim-run "$@" >"$out/$name.txt" 2>"$out/$name.stderr" || rc=$?
    [ -s "$out/$name.stderr" ] || rm -f "$out/$name.stderr"
    echo "$rc" >"$out/$name.rc"
}
q=(-C ibsim0 -P 1 -t 500)
run smpquery-nodeinfo-switch Hca1 smpquery "${q[@]}" -D nodeinfo 0,1
run smpquery-nodedesc-switch Hca1 smpquery "${q[@]}" -D nodedesc 0,1
run smpquery-portinfo-switch-port Hca1 smpquery "${q[@]}" -D portinfo 0,1 3
run smpquery-portinfo-switch-port0 Hca1 smpquery "${q[@]}" -D portinfo 0,1 0
run smpquery-portinfo-hca-port Hca1 smpquery "${q[@]}" -D portinfo 0 1
run smpquery-portinfo-switch-port-1x Hca2 smpquery "${q[@]}" -D portinfo 0,1 5
run smpquery-portinfo-switch-port-sdr Hca3 smpquery "${q[@]}" -D portinfo 0,1 7
run smpquery-portinfo-hca-port-sdr Hca3 smpquery "${q[@]}" -D portinfo 0 1
run smpquery-nodeinfo-b2b-ca Hca4 smpquery "${q[@]}" -D nodeinfo 0,1
run smpquery-nodedesc-b2b-ca Hca4 smpquery "${q[@]}" -D nodedesc 0,1
run smpquery-portinfo-b2b-ca-port Hca4 smpquery "${q[@]}" -D portinfo 0,1 1

lid="$(SIM_HOST=Hca1 ibsim-run smpquery "${q[@]}" -D portinfo 0,1 0 2>/dev/null | sed -n 's/^Lid:\.*//p')"
# Counters on the switch port facing Hca1 (port 3), set through the ibsim console.
for set in SymbolErrorCounter=1234 LinkErrorRecoveryCounter=3 LinkDownedCounter=2 \
    PortRcvErrors=17 PortRcvRemotePhysicalErrors=5 PortXmitDiscards=9 \
    LocalLinkIntegrityErrors=1 ExcessiveBufferOverrunErrors=4 PortXmitWait=5000; do
    echo "PerformanceSet \"Switch1\"[3] PortCounters.$set" >&3
done
sleep 0.5
run perfquery-switch-port Hca1 perfquery "${q[@]}" "$lid" 3
run perfquery-x-switch-port Hca1 perfquery "${q[@]}" -x "$lid" 3
run perfquery-E-switch-port Hca1 perfquery "${q[@]}" -E "$lid" 3
run perfquery-switch-port-healthy Hca1 perfquery "${q[@]}" "$lid" 1
# MADs dropped on the switch's side of the cable: every SMP through it times out (-t 500 ms).
echo 'Error "Switch1"[3] 100' >&3
sleep 0.5
run smpquery-nodeinfo-timeout Hca1 smpquery "${q[@]}" -D nodeinfo 0,1
run perfquery-timeout Hca1 perfquery "${q[@]}" "$lid" 3
echo "capture lid of Switch1: $lid" >&2
cp ibsim.log "$out/ibsim-console.log"
