#!/usr/bin/env bash
# A production S3 peer for bench/run.sh (PEERS=radosgw): a single-node Ceph from the Debian
# packages (apt-get install ceph-mon ceph-mgr ceph-osd radosgw ceph-common), with one monitor,
# one manager, one BlueStore OSD on a loop device over a sparse file in $WORK, pools of size 1,
# and radosgw with the beast frontend on an ephemeral port of 127.0.0.1; an S3 user made with
# radosgw-admin. No cephx (auth none: one host, loopback only). Every daemon runs in the
# foreground under this shell, so peer_stop can stop exactly the processes it started; it also
# detaches the loop device it attached. Needs root (losetup).
#
# As a library (sourced by bench/run.sh, after bench/lib.sh and bench_init):
#   peer_start    sets PEER_URL PEER_ACCESS_KEY PEER_SECRET_KEY; returns 1 (with the reason on
#                 stderr and everything undone) if Ceph cannot run here
#   peer_stop     stops the daemons, detaches the loop device, removes the cluster's files
# Standalone: bench/peers/radosgw.sh [check|tier]   starts it; "check" PUTs and GETs one object
#   with hots3-loadgen (BUILD, default build/release), "tier" runs the tiering scenario matrix
#   (tests/integration/test_tier_matrix.py) with it as the upstream, and either stops it; without
#   either it waits for Ctrl-C so that it can be driven by hand.
# env: RGW_OSD_SIZE (sparse size of the OSD's file, default 24GiB), RGW_OSD_MEMORY (1GiB),
#      RGW_CONF_EXTRA (lines appended to ceph.conf, e.g. "[osd]\ndebug_ms = 1")

RGW_ACCESS_KEY=RGWBENCHACCESSKEY001
RGW_SECRET_KEY=rgw-bench-secret-key-0123456789abcdef
RGW_PIDS=()
RGW_LOOP=

rgw_wait() {  # rgw_wait SECONDS COMMAND...: retries COMMAND every half second
  local deadline=$((SECONDS + $1))
  shift
  until "$@" > /dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

peer_start() {
  local d=$WORK/ceph tool
  for tool in ceph-mon ceph-mgr ceph-osd radosgw radosgw-admin monmaptool ceph losetup; do
    command -v "$tool" > /dev/null || { echo "radosgw: needs $tool (apt-get install ceph-mon ceph-mgr ceph-osd radosgw ceph-common)" >&2; return 1; }
  done
  [ "$(id -u)" = 0 ] || { echo "radosgw: needs root for the loop device" >&2; return 1; }
  mkdir -p "$d"/{mon,osd0,run,log,rgw,crash}
  local fsid mon_port rgw_port osd_uuid
  fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
  osd_uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
  mon_port=$(free_port)
  rgw_port=$(free_port)
  cat > "$d/ceph.conf" <<CONF
[global]
fsid = $fsid
mon_host = [v1:127.0.0.1:$mon_port]
ms_bind_msgr2 = false
ms_bind_ipv4 = true
ms_bind_ipv6 = false
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
public_network = 127.0.0.0/8
cluster_network = 127.0.0.0/8
mon_data_avail_warn = 5
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
osd_pool_default_pg_autoscale_mode = off
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
run_dir = $d/run
log_file = $d/log/\$name.log
crash_dir = $d/crash
admin_socket = $d/run/\$name.asok
[mon]
mon_data = $d/mon
[mgr]
mgr_data = $d/mgr
[osd]
osd_data = $d/osd\$id
osd_objectstore = bluestore
osd_memory_target = ${RGW_OSD_MEMORY:-1073741824}
bluestore_block_path = __LOOP__
[client.rgw.bench]
rgw_frontends = beast endpoint=127.0.0.1:$rgw_port
rgw_data = $d/rgw
rgw_dns_name = 127.0.0.1
${RGW_CONF_EXTRA:-}
CONF
  local conf=(-c "$d/ceph.conf")
  {
    monmaptool --create --addv a "[v1:127.0.0.1:$mon_port]" --fsid "$fsid" "$d/monmap" &&
      ceph-mon "${conf[@]}" --mkfs -i a --monmap "$d/monmap"
  } > "$d/log/setup.log" 2>&1 || { echo "radosgw: ceph-mon --mkfs failed: $(tail -5 "$d/log/setup.log")" >&2; peer_stop; return 1; }
  ceph-mon "${conf[@]}" -f -i a > "$d/log/mon.out" 2>&1 &
  RGW_PIDS+=($!)
  rgw_wait 60 ceph "${conf[@]}" --connect-timeout 5 mon stat || { echo "radosgw: the monitor did not answer: $(tail -5 "$d/log/mon.out")" >&2; peer_stop; return 1; }
  mkdir -p "$d/mgr"
  ceph-mgr "${conf[@]}" -f -i x > "$d/log/mgr.out" 2>&1 &
  RGW_PIDS+=($!)

  # The OSD: BlueStore on a loop device over a sparse file (what a real disk would be).
  truncate -s "${RGW_OSD_SIZE:-24G}" "$d/osd.img"
  RGW_LOOP=$(losetup --find --show --direct-io=on "$d/osd.img") || { echo "radosgw: losetup failed" >&2; peer_stop; return 1; }
  sed -i "s|__LOOP__|$RGW_LOOP|" "$d/ceph.conf"  # BlueStore links osd0/block to it at --mkfs
  local id
  id=$(ceph "${conf[@]}" osd new "$osd_uuid" 2>> "$d/log/setup.log") || { echo "radosgw: ceph osd new failed" >&2; peer_stop; return 1; }
  ceph-osd "${conf[@]}" -i "$id" --mkfs --osd-uuid "$osd_uuid" >> "$d/log/setup.log" 2>&1 ||
    { echo "radosgw: ceph-osd --mkfs failed: $(tail -5 "$d/log/setup.log")" >&2; peer_stop; return 1; }
  ceph-osd "${conf[@]}" -f -i "$id" > "$d/log/osd.out" 2>&1 &
  RGW_PIDS+=($!)
  rgw_wait 120 bash -c "ceph ${conf[*]} osd stat -f json | grep -q '\"num_up_osds\":1'" ||
    { echo "radosgw: the OSD did not come up: $(tail -5 "$d/log/osd.out")" >&2; peer_stop; return 1; }

  radosgw "${conf[@]}" -f -n client.rgw.bench > "$d/log/rgw.out" 2>&1 &
  RGW_PIDS+=($!)
  PEER_URL="http://127.0.0.1:$rgw_port"
  rgw_wait 180 curl -sf -o /dev/null "$PEER_URL/" ||
    { echo "radosgw: radosgw did not answer on $PEER_URL: $(tail -5 "$d/log/rgw.out"; tail -5 "$d/log/client.rgw.bench.log" 2>/dev/null)" >&2; peer_stop; return 1; }
  radosgw-admin "${conf[@]}" user create --uid bench --display-name bench \
    --access-key "$RGW_ACCESS_KEY" --secret-key "$RGW_SECRET_KEY" >> "$d/log/setup.log" 2>&1 ||
    { echo "radosgw: radosgw-admin user create failed: $(tail -5 "$d/log/setup.log")" >&2; peer_stop; return 1; }
  PEER_ACCESS_KEY=$RGW_ACCESS_KEY
  PEER_SECRET_KEY=$RGW_SECRET_KEY
  echo "radosgw: $PEER_URL (Ceph $(ceph-osd --version | awk '{print $3}'), BlueStore OSD on $RGW_LOOP)"
}

peer_stop() {
  local p i
  # radosgw first, then manager, OSD, monitor: the reverse of their start.
  for ((i = ${#RGW_PIDS[@]} - 1; i >= 0; i--)); do
    p=${RGW_PIDS[i]}
    kill "$p" 2> /dev/null || true
    for _ in $(seq 100); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$p" 2> /dev/null || true
    wait "$p" 2> /dev/null || true
  done
  RGW_PIDS=()
  if [ -n "$RGW_LOOP" ]; then
    losetup -d "$RGW_LOOP" || echo "radosgw: could not detach $RGW_LOOP" >&2
    RGW_LOOP=
  fi
  rm -rf "$WORK/ceph"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/../.."
  # shellcheck source=bench/lib.sh
  . bench/lib.sh
  bench_init radosgw
  trap 'peer_stop; bench_cleanup' EXIT
  trap 'exit 1' INT TERM
  peer_start || exit 1
  case "${1:-}" in
    check)
      LOADGEN=${BUILD:-build/release}/bench/hots3-loadgen
      "$LOADGEN" --endpoint "$PEER_URL" --access-key "$PEER_ACCESS_KEY" --secret-key "$PEER_SECRET_KEY" \
        --bucket check --workload get --size 1MiB --objects 8 -c 2 --duration 2s --verify
      ;;
    tier)
      # The tiering scenario matrix (every mode) with radosgw as the upstream.
      HOTS3_BIN=$(realpath "${BUILD:-build/release}/src/hots3") \
        HOTS3_TIER_PEER="$PEER_URL $PEER_ACCESS_KEY $PEER_SECRET_KEY" \
        python3 tests/integration/test_tier_matrix.py -v
      ;;
    *)
      echo "access key $PEER_ACCESS_KEY, secret key $PEER_SECRET_KEY; Ctrl-C stops it"
      while true; do sleep 3600; done
      ;;
  esac
fi
