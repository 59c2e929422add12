#!/usr/bin/env bash
# Epochs over a dataset twice the size of the cache: a training job reads a dataset that lives
# upstream and does not fit on the device, again and again. The first epoch streams it through;
# in the next ones a read is a hit only if eviction kept its object. No policy can keep more
# than the cache's share of the dataset, so that share is the ideal hit ratio of an epoch (goal:
# epochs 2 to EPOCHS hit >= 0.8 of it). The eviction policy "frequency" (the default) against
# "lru" beside it, which in a loop over more than the cache evicts each object just before it is
# read again.
#
#   The upstream (a second hots3) holds twice CACHE bytes in objects of OBJECT bytes under ds/.
#   A local hots3 fronts it in cache mode, on a device of which CACHE is the default high
#   watermark (90%: the most eviction lets it hold). For each policy and each order, a fresh
#   local server reads the dataset EPOCHS times: in the same order every epoch, or in another
#   shuffled order each epoch (seeded: the same orders for both policies). A read is a hit when
#   the server says so (x-hots3-cache: hit); every read's status and size are checked.
#
# usage: bench/tier/epochs.sh [BUILD_DIR]       (default build/release)
# env:   CACHE (1073741824) OBJECT (4194304) EPOCHS (3) BENCH_TMPDIR (/var/tmp)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
BUILD=${1:-build/release}
HOTS3=$BUILD/src/hots3
[ -x "$HOTS3" ] || { echo "build $HOTS3 first" >&2; exit 1; }
need curl python3
CACHE=${CACHE:-1073741824}
OBJECT=${OBJECT:-4194304}
EPOCHS=${EPOCHS:-3}
HIGH=90  # the default high watermark
LOCAL_DEVICE=$(((CACHE * 100 / HIGH + 1048575) / 1048576 * 1048576))
N=$((2 * CACHE / OBJECT))
bench_init tier-epochs

signed() {
  curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$BENCH_ACCESS_KEY:$BENCH_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

DEVICE_BYTES=$((N * OBJECT * 2 + 1024 * 1024 * 1024))
start_tier_server up
signed -f -o /dev/null -X PUT "$URL_up/team"
printf 'access_key = "%s"\nsecret_key = "%s"\n' "$BENCH_ACCESS_KEY" "$BENCH_SECRET_KEY" > "$WORK/golden.toml"
head -c "$OBJECT" /dev/urandom > "$WORK/obj"
for i in $(seq -f %04g 0 $((N - 1))); do
  signed -f -o /dev/null -T "$WORK/obj" "$URL_up/team/ds/$i"
done
rm -f "$WORK/obj"
echo "tier epochs: $N objects of $OBJECT bytes upstream, a $LOCAL_DEVICE-byte device (cache: $HIGH%);" \
  "$EPOCHS epochs each policy and order; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"

# The orders: the dataset's own, and a shuffle of it for each epoch (seeded).
seq -f %04g 0 $((N - 1)) > "$WORK/order.same"
for e in $(seq "$EPOCHS"); do
  cp "$WORK/order.same" "$WORK/order.same.$e"
  python3 -c 'import random, sys
keys = ["%04d" % i for i in range(int(sys.argv[1]))]
random.Random(int(sys.argv[2])).shuffle(keys)
print("\n".join(keys))' "$N" "$e" > "$WORK/order.shuffled.$e"
done

# epoch ORDER_FILE: reads the keys of ORDER_FILE from the local server in order; prints the hits.
epoch() {
  local hits=0 key status size cache
  while read -r key; do
    read -r status size cache < <(signed -o /dev/null \
      -w '%{http_code} %{size_download} %header{x-hots3-cache}\n' "$URL_local/dataset/ds/$key")
    if [ "$status" != 200 ] || [ "$size" != "$OBJECT" ]; then
      echo "GET ds/$key: $status, $size bytes" >&2
      exit 1
    fi
    [ "$cache" = hit ] && hits=$((hits + 1))
  done < "$1"
  echo "$hits"
}

IDEAL=$(python3 -c "print(round(min(100.0, 100 * $CACHE / ($N * $OBJECT)), 1))")
declare -A RATIO
for policy in frequency lru; do
  for kind in same shuffled; do
    DEVICE_BYTES=$LOCAL_DEVICE
    rm -rf "$WORK/local"
    start_tier_server local "[[tier.upstream]]
name = \"golden\"
endpoint = \"$URL_up\"
credentials_file = \"$WORK/golden.toml\"
[[tier.bucket]]
bucket = \"dataset\"
upstream = \"golden\"
upstream_bucket = \"team\"
mode = \"cache\"
[tier.evict]
policy = \"$policy\""
    epoch "$WORK/order.$kind.1" > /dev/null
    total=0
    for e in $(seq 2 "$EPOCHS"); do
      hits=$(epoch "$WORK/order.$kind.$e")
      echo "  $policy, $kind order, epoch $e: $hits of $N hits"
      total=$((total + hits))
    done
    RATIO[$policy.$kind]=$(python3 -c "print(round(100 * $total / (($EPOCHS - 1) * $N), 1))")
    kill "$PID_local"
    wait "$PID_local" 2> /dev/null || true
  done
done

table_head
for kind in same shuffled; do
  row "epoch hits, $kind order, %" "${RATIO[frequency.$kind]}" "$IDEAL" "(the cache's share)" 80
  row_info "the same, policy lru, %" "${RATIO[lru.$kind]}" \
    "($(python3 -c "print(round(100 * ${RATIO[lru.$kind]} / $IDEAL))")% of the share)"
done
