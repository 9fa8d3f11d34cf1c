# Two "hosts" for a test under mpirun, sourced by the two-host tests: two
# network namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2), mpirun
# reaching the second one through an rsh agent ($WORK/agent.sh) that runs the
# command inside it. Each namespace also gets its own mount namespace with
# its own log directory, as two hosts have their own disks: the test runs in
# $WORK/job (host 1) and host 2 sees $WORK/host2 there. Sets NS1, NS2, WORK
# and MCA (the mpirun arguments that keep the job on the veth pair); removes
# everything at exit. Exits 77 (skip) where network namespaces cannot be made.
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare not installed"; exit 77; }
TAG=fr$$
NS1=${TAG}a
NS2=${TAG}b
WORK=$(mktemp -d /tmp/netns_hosts.XXXXXX)
cleanup() {
  [ -n "${NS1:-}" ] && ip netns pids "$NS1" 2>/dev/null | xargs -r kill -9 2>/dev/null
  [ -n "${NS2:-}" ] && ip netns pids "$NS2" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$NS1" 2>/dev/null
  ip netns del "$NS2" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
if ! ip netns add "$NS1" 2>/dev/null; then
  echo "SKIP: 'ip netns add' is not permitted here (needs root / CAP_SYS_ADMIN)"
  NS1= NS2=
  exit 77
fi
ip netns add "$NS2" || exit 1
ip link add ${TAG}v1 type veth peer name ${TAG}v2 || { echo "SKIP: cannot create a veth pair"; exit 77; }
ip link set ${TAG}v1 netns "$NS1" && ip link set ${TAG}v2 netns "$NS2" || exit 1
ip -n "$NS1" addr add 10.77.0.1/24 dev ${TAG}v1 && ip -n "$NS2" addr add 10.77.0.2/24 dev ${TAG}v2 || exit 1
for ns in "$NS1" "$NS2"; do ip -n "$ns" link set lo up; done
ip -n "$NS1" link set ${TAG}v1 up && ip -n "$NS2" link set ${TAG}v2 up || exit 1

# "host" 2's private directory is bind-mounted over the job directory, so
# its log/ is its own
mkdir -p "$WORK/job" "$WORK/host2"
cat >"$WORK/agent.sh" <<X
#!/bin/sh
# plm_rsh_agent: agent <host> <command...>; the host is 10.77.0.2 here
shift
exec ip netns exec $NS2 unshare -m sh -c 'mount --bind $WORK/host2 $WORK/job && exec sh -c "\$0"' "\$*"
X
chmod +x "$WORK/agent.sh"
cd "$WORK/job" || exit 1
MCA="--mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 --mca btl self,tcp"
MCA="$MCA --mca plm_rsh_no_tree_spawn 1 --mca orte_keep_fqdn_hostnames 1"
