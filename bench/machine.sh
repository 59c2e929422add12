#!/usr/bin/env bash
# The machine a benchmark ran on: CPU model and cores, memory, kernel, and the disk under PATH
# (default /var/tmp, where the bench puts its device file): model, size, file system.
# usage: bench/machine.sh [PATH | BLOCK_DEVICE]
set -euo pipefail
path=${1:-${BENCH_TMPDIR:-/var/tmp}}
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "cpu: ${cpu:-unknown}, $(nproc) cores online ($(grep -c ^processor /proc/cpuinfo) listed)"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "kernel: $(uname -r)"
if [ -b "$path" ]; then
  dev=$path fs="(raw block device)"
else
  dev=$(df --output=source "$path" | tail -1)
  fs="$(df --output=fstype "$path" | tail -1) at $(df --output=target "$path" | tail -1)"
fi
# The whole disk under a partition (or a device-mapper volume): its model and rotational flag.
disk=$(lsblk -no PKNAME "$dev" 2>/dev/null | tail -1 || true)
[ -n "$disk" ] || disk=$(basename "$dev")
model=$(cat "/sys/block/$disk/device/model" 2>/dev/null | sed 's/ *$//' || true)
[ -n "$model" ] || model=$(lsblk -dno MODEL "/dev/$disk" 2>/dev/null || true)
size=$(lsblk -dno SIZE "/dev/$disk" 2>/dev/null | sed 's/ //g' || true)
rot=$(cat "/sys/block/$disk/queue/rotational" 2>/dev/null || echo '?')
sched=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "/sys/block/$disk/queue/scheduler" 2>/dev/null || true)
echo "disk: $dev on /dev/$disk, model ${model:-unknown (virtual?)}, ${size:-? } total, rotational $rot, scheduler ${sched:-?}; $fs"
