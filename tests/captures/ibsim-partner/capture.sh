#!/bin/sh
# Regenerate the captures in this folder from the ibsim fabric simulator (Debian ibsim-utils,
# opensm, infiniband-diags). Run from this folder: sh capture.sh. Only one ibsim may run per
# machine (fixed socket name): this refuses to start when one is running, and stops only the
# processes it started, by PID.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if pgrep -x ibsim >/dev/null; then echo "an ibsim is already running: not starting another" >&2; exit 1; fi
work=$(mktemp -d)
trap 'stop; rm -rf "$work"' EXIT
sim_pid= holder_pid= sm_pid=

start() {  # start NETFILE: ibsim on the topology, console on a FIFO
    cp "$here/$1" "$work/net"
    rm -f "$work/fifo"; mkfifo "$work/fifo"
    (cd "$work" && exec ibsim -s net < fifo > ibsim.log 2>&1) & sim_pid=$!
    sleep 1000000 > "$work/fifo" & holder_pid=$!
    sleep 1
    kill -0 "$sim_pid" 2>/dev/null || { echo "ibsim did not start:" >&2; cat "$work/ibsim.log" >&2; exit 1; }
}
sm() { (cd "$work" && exec ibsim-run opensm -f opensm.log > /dev/null 2>&1) & sm_pid=$!; sleep 6; }
console() { printf '%s\n' "$1" > "$work/fifo"; sleep 0.5; }
stop() {
    for pid in $sm_pid $holder_pid $sim_pid; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    sim_pid= holder_pid= sm_pid=
}
# cap NAME HOST TOOL ARGS...: stdout to NAME.txt, stderr (pids replaced) to NAME.stderr when
# there was any, the exit status to NAME.rc when it was not 0.
cap() {
    name=$1 host=$2; shift 2
    (cd "$work" && SIM_HOST=$host timeout 10 ibsim-run "$@" > "$here/$name.txt" 2> "$work/err")
    rc=$?
    [ -s "$work/err" ] && sed 's/\[[0-9]*\]/[PID]/' "$work/err" > "$here/$name.stderr"
    [ "$rc" -ne 0 ] && echo "$rc" > "$here/$name.rc"
    [ -s "$here/$name.txt" ] || rm -f "$here/$name.txt"
}
chain() {  # chain PREFIX HOST PARTNER_PORT PARTNER_LID: the partner chain ibdiag runs
    # (PARTNER_LID "ca": a CA's, read from its port's PortInfo as the chain reads it)
    p=$1 h=$2 port=$3 lid=$4
    cap "$p-nodeinfo" "$h" smpquery -C ibsim0 -P 1 -t 1000 -D nodeinfo 0,1
    cap "$p-nodedesc" "$h" smpquery -C ibsim0 -P 1 -t 1000 -D nodedesc 0,1
    cap "$p-portinfo" "$h" smpquery -C ibsim0 -P 1 -t 1000 -D portinfo 0,1 "$port"
    [ "$lid" = ca ] && lid=$(sed -n 's/^Lid:\.*//p' "$here/$p-portinfo.txt")
    cap "$p-portinfo0" "$h" smpquery -C ibsim0 -P 1 -t 1000 -D portinfo 0,1 0
    cap "$p-perfquery-x" "$h" perfquery -C ibsim0 -P 1 -t 1000 -x "$lid" "$port"
    cap "$p-perfquery" "$h" perfquery -C ibsim0 -P 1 -t 1000 "$lid" "$port"
    cap "$p-perfquery-E" "$h" perfquery -C ibsim0 -P 1 -t 1000 -E "$lid" "$port"
}

start leaf.net
# No subnet manager yet: the links are up but not ACTIVE and every LID is 0.
cap nosm-portinfo node01-hca0 smpquery -C ibsim0 -P 1 -t 1000 -D portinfo 0,1 1
cap nosm-portinfo0 node01-hca0 smpquery -C ibsim0 -P 1 -t 1000 -D portinfo 0,1 0
cap nosm-perfquery-x node01-hca0 perfquery -C ibsim0 -P 1 -t 1000 -x 0 1
sm
chain switch-hdr node01-hca0 1 1
chain switch-port2 node02-hca0 2 1
chain switch-port3 node03-hca0 3 1
console 'PerformanceSet "leaf07"[1] PortCounters.SymbolErrorCounter=1234'
console 'PerformanceSet "leaf07"[1] PortCounters.LinkDownedCounter=3'
cap switch-hdr-errors-perfquery node01-hca0 perfquery -C ibsim0 -P 1 -t 1000 1 1
# A partner that drops MADs; a port that does not exist; an HCA the tool cannot open.
console 'Error "leaf07"[1] 100'
cap error-nodeinfo node01-hca0 smpquery -C ibsim0 -P 1 -t 200 -D nodeinfo 0,1
cap nosuchport-portinfo node02-hca0 smpquery -C ibsim0 -P 1 -t 1000 -D portinfo 0,1 99
cap noca-nodeinfo node02-hca0 smpquery -C mlx5_9 -P 1 -t 1000 -D nodeinfo 0,1
stop

start b2b.net
sm
chain b2b-ca hostA 1 ca
stop

# Without the simulator: the real tools on a machine with no InfiniBand device (no ib_umad).
real() {
    name=$1; shift
    timeout 10 "$@" > "$here/$name.txt" 2> "$work/err"; rc=$?
    [ -s "$work/err" ] && sed 's/\[[0-9]*\]/[PID]/' "$work/err" > "$here/$name.stderr"
    [ "$rc" -ne 0 ] && echo "$rc" > "$here/$name.rc"
    [ -s "$here/$name.txt" ] || rm -f "$here/$name.txt"
}
real nodevice-nodeinfo smpquery -C mlx5_0 -P 1 -t 1000 -D nodeinfo 0,1
real nodevice-perfquery-x perfquery -C mlx5_0 -P 1 -t 1000 -x 1 1

# Not root: the real tools as an unprivileged user (nobody) on a node whose umad device is
# root-only (crw------- root root, as a distribution without a umad group makes it). The
# simulator cannot show this: umad2sim answers the tool's open of /dev/infiniband/umad0 itself.
# So, as root, in a private mount namespace: a /sys holding what libibumad reads for mlx5_0
# port 1 (its umad0), a /dev holding umad0 as the char device 231:0, mode 0600.
[ "$(id -u)" -eq 0 ] || { echo "not root: no notroot-* captures (they need unshare)" >&2; exit 0; }
unshare --mount --propagation private sh -s "$here" "$work" <<'NAMESPACE'
set -eu
here=$1 ns=$2/ns
mkdir -p "$ns/sys" "$ns/dev"
mount -t tmpfs -o mode=0755 ibdiag-notroot "$ns/dev"
for name in null zero full random urandom tty; do
    : > "$ns/dev/$name"; mount --bind "/dev/$name" "$ns/dev/$name"
done
ln -s /proc/self/fd "$ns/dev/fd"
mkdir "$ns/dev/infiniband"
mknod -m 600 "$ns/dev/infiniband/umad0" c 231 0
mkdir -p "$ns/sys/class/infiniband/mlx5_0/ports/1" "$ns/sys/class/infiniband_mad/umad0"
echo 5 > "$ns/sys/class/infiniband_mad/abi_version"
echo mlx5_0 > "$ns/sys/class/infiniband_mad/umad0/ibdev"
echo 1 > "$ns/sys/class/infiniband_mad/umad0/port"
echo "4: ACTIVE" > "$ns/sys/class/infiniband/mlx5_0/ports/1/state"
mount --rbind "$ns/dev" /dev
mount --bind "$ns/sys" /sys
nobody() {
    name=$1; shift
    setpriv --reuid=65534 --regid=65534 --clear-groups "$@" > "$here/$name.txt" 2> "$ns/err"
    rc=$?
    [ -s "$ns/err" ] && sed 's/\[[0-9]*\]/[PID]/' "$ns/err" > "$here/$name.stderr"
    [ "$rc" -ne 0 ] && echo "$rc" > "$here/$name.rc"
    [ -s "$here/$name.txt" ] || rm -f "$here/$name.txt"
}
set +e
nobody notroot-open sh -c 'exec 3<> /dev/infiniband/umad0'
nobody notroot-nodeinfo smpquery -C mlx5_0 -P 1 -t 1000 -D nodeinfo 0,1
nobody notroot-perfquery-x perfquery -C mlx5_0 -P 1 -t 1000 -x 1 1
NAMESPACE
