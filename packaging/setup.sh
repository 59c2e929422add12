#!/usr/bin/env bash
# The README's two commands, for a fresh Debian bookworm machine:
#
#   packaging/setup.sh run    install what is needed, build, start hots3 with its defaults
#                             (further arguments go to `hots3 serve`: --listen 127.0.0.1:9001)
#   packaging/setup.sh test   install what is needed, build (release + ASan/UBSan), run every test,
#                             and fuzz every parser for 30 s each (clang, libFuzzer)
#   packaging/setup.sh fuzz   the fuzzing alone, for H3_FUZZ_SECONDS each (H3_FUZZ_SECONDS=1800)
#   packaging/setup.sh bench  install what is needed, build release, run bench/run.sh (quiet machine!)
#
# Both install their own dependencies (apt-get; npm for the JavaScript clients), so a bare
# machine or a CI runner needs nothing else. .ci/run calls "packaging/setup.sh test".
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-}
JOBS=${JOBS:-$(nproc)}
# What the sanitizer pass of `test` leaves to the release build (CTest labels).
SANITIZE_EXCLUDED=clients
[ "${SANITIZE_ALL:-0}" = 0 ] || SANITIZE_EXCLUDED=""

log() { printf '\n==> %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Build dependencies. Boost is the 1.81 header package only: it conflicts with the default 1.74
# -dev packages, which must never be installed next to it.
BUILD_PACKAGES=(
  cmake g++ ninja-build ccache pkg-config git
  libboost1.81-dev liburing-dev libsqlite3-dev libxml2-dev libssl-dev libxxhash-dev libisal-dev
  libmimalloc-dev libfmt-dev libspdlog-dev libtomlplusplus-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 openssl ca-certificates
)
# What the tests drive hots3 with: the image's python3 already has boto3 1.43 and AWS CLI v1;
# Debian adds boto3 1.26 (older defaults, for /usr/bin/python3) and AWS CLI v2, and the clients
# of s3-compat-tests (s3cmd, rclone, s3fs-fuse, which brings fuse; wget; smart_open; Go with the
# AWS SDK for Go v2 and minio-go, as source the suite is built against); Prometheus, which
# scrapes a running hots3 in a test (its promtool checks the metrics); what builds, installs and
# verifies the .deb (dpkg-dev for its dependencies, systemd for systemd-analyze, logrotate for
# its log rotation); and the lint:
# clang-format and clang-tidy.
TEST_PACKAGES=(
  curl wget python3-boto3 python3-pytest python3-smart-open awscli s3cmd rclone s3fs
  golang-go golang-github-aws-aws-sdk-go-v2-dev golang-github-minio-minio-go-v7-dev
  prometheus dpkg-dev systemd logrotate clang-format clang-tidy
)
# The fuzz harnesses: clang with libFuzzer (its runtime is in libclang-rt-14-dev).
FUZZ_PACKAGES=(
  clang libclang-rt-14-dev python3
)

# What bench/run.sh measures against (fio, nginx with wrk) and, for PEERS=radosgw, a one-node Ceph.
BENCH_PACKAGES=(
  curl fio wrk nginx ceph-mon ceph-mgr ceph-osd radosgw ceph-common
)

# What `run` needs beyond the build: the AWS CLI, for the `aws --endpoint-url ... s3 ls` that the
# server prints at start.
RUN_PACKAGES=(
  awscli
)

install_packages() {
  if [ "$STOP" = configure ]; then
    return
  fi
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "Debian packages: all present"
    return
  fi
  log "Installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Node.js and the npm packages of the JavaScript client tests. @aws-sdk/client-s3 needs Node 20 or
# later; Debian bookworm has 18, so an older node gets a Node 22 from the npm registry next to
# the build (node-linux-<arch>, the official binaries), used only by the tests.
NODE_BIN=
install_node() {
  if [ "$STOP" = configure ]; then
    NODE_BIN=$(command -v node || command -v nodejs || echo node)
    return
  fi
  command -v npm >/dev/null || install_packages nodejs npm
  NODE_BIN=$(command -v node || command -v nodejs)
  local major
  major=$("$NODE_BIN" -p 'process.versions.node.split(".")[0]')
  if [ "$major" -lt 20 ]; then
    local arch
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64) arch=arm64 ;;
      *) echo "no Node 20+ for $(uname -m)" >&2; exit 1 ;;
    esac
    log "Node $major is too old for @aws-sdk/client-s3: installing Node 22 from npm into .cache/node"
    npm install --no-audit --no-fund --silent --prefix "$ROOT/.cache/node" "node-linux-$arch@22"
    NODE_BIN=$ROOT/.cache/node/node_modules/node-linux-$arch/bin/node
  fi
  log "npm packages of the JavaScript client tests (node $("$NODE_BIN" --version))"
  npm ci --no-audit --no-fund --silent --prefix "$ROOT/tests/integration/node"
  npm ci --no-audit --no-fund --silent --prefix "$ROOT/s3-compat-tests"
}

# Every build directory is configured with all the options it depends on, stated here in full,
# each time: whatever ran before (another of these commands, an interrupted build, a by-hand
# cmake with other options), a command leaves its directory configured exactly as on a fresh
# clone. run, test and bench share build/release with one configuration; run builds only the
# server from it, so switching between them never rebuilds what is already built.
RELEASE_DIR=$ROOT/build/release
RELEASE_BUILD_OPTIONS=(
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH3_WERROR=ON -DH3_BUILD_TESTS=ON -DH3_BUILD_BENCH=ON
  -DH3_SANITIZE= -DH3_MIMALLOC=ON -DH3_FUZZ=OFF
)
ASAN_DIR=$ROOT/build/asan
ASAN_BUILD_OPTIONS=(
  -DCMAKE_BUILD_TYPE=Debug -DH3_WERROR=ON -DH3_BUILD_TESTS=ON -DH3_BUILD_BENCH=OFF
  "-DH3_SANITIZE=address,undefined" -DH3_MIMALLOC=OFF -DH3_FUZZ=OFF
)
FUZZ_DIR=$ROOT/build/fuzz
FUZZ_BUILD_OPTIONS=(
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH3_WERROR=ON -DH3_BUILD_TESTS=OFF -DH3_BUILD_BENCH=OFF
  "-DH3_SANITIZE=address,undefined" -DH3_MIMALLOC=OFF -DH3_FUZZ=ON
)
# clang by its full path, as CMake records it: another spelling would look like another compiler
# and make CMake start the directory anew.
configure_fuzz() {
  configure "$FUZZ_DIR" "${FUZZ_BUILD_OPTIONS[@]}" -DCMAKE_CXX_COMPILER="$(command -v clang++ || echo clang++)"
}
# Seconds each fuzz harness runs: a short round in every test run, longer by hand.
FUZZ_SECONDS=${H3_FUZZ_SECONDS:-30}

# H3_SETUP_STOP=configure: configure the build directories as the command would, print what it
# would do next, and stop (no installs, no builds). packaging/setup_test.py drives the commands
# in this mode on a copy of the repository to check that their order does not matter.
STOP=${H3_SETUP_STOP:-}
case "$STOP" in
  ""|configure) ;;
  *) echo "H3_SETUP_STOP must be empty or 'configure', not '$STOP'" >&2; exit 64 ;;
esac
would() { printf 'would run:'; printf ' %q' "$@"; printf '\n'; }

# configure DIR [cmake args...]
configure() {
  local dir=$1
  shift
  # A directory configured for another generator (a by-hand `cmake -B build/release` with
  # Makefiles) cannot be reconfigured for Ninja: start it anew.
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$dir/CMakeCache.txt"; then
    log "$dir was configured for another generator: configuring it anew"
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
  log "Configuring $dir"
  cmake -S "$ROOT" -B "$dir" -G Ninja "$@" >/dev/null
}

# build DIR [targets...]
build() {
  local dir=$1
  shift
  local targets=()
  [ $# -eq 0 ] || targets=(--target "$@")
  if [ "$STOP" = configure ]; then
    would cmake --build "$dir" -j "$JOBS" "${targets[@]}"
    return
  fi
  log "Building in $dir${*:+ (${*})}"
  export CCACHE_DIR=${CCACHE_DIR:-$ROOT/.cache/ccache}
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  local start=$SECONDS
  cmake --build "$dir" -j "$JOBS" "${targets[@]}"
  log "Built $dir in $((SECONDS - start)) s"
}

# run_ctest DIR LABEL-REGEX [EXCLUDED-LABEL-REGEX]: runs the tests, remembers the counts for the
# final line.
PASSED=0
FAILED=0
run_ctest() {
  local dir=$1 labels=$2 excluded=${3:-} out status=0
  local select=(-L "$labels")
  [ -z "$excluded" ] || select+=(-LE "$excluded")
  log "Running tests in $dir (labels: $labels${excluded:+, not $excluded})"
  out=$(mktemp)
  (cd "$dir" && ctest -j "$JOBS" "${select[@]}" --output-on-failure --timeout 1200) 2>&1 | tee "$out" || status=$?
  local total failed
  total=$(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$out" | tail -1)
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p' "$out" | tail -1)
  rm -f "$out"
  if [ -z "$total" ]; then
    FAILED=$((FAILED + 1))  # ctest itself failed
    return
  fi
  PASSED=$((PASSED + total - failed))
  FAILED=$((FAILED + failed))
  [ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || FAILED=$((FAILED + 1))
}

# The port `run` will listen on, from its --listen argument (default 127.0.0.1:9000), if it is
# taken: said before the build, with the way out, rather than after it.
check_port() {
  local listen=127.0.0.1:9000 previous=
  for arg in "$@"; do
    case "$arg" in
      --listen=*) listen=${arg#--listen=} ;;
      --config|--config=*) return ;;  # the file may choose the address
    esac
    [ "$previous" = --listen ] && listen=$arg
    previous=$arg
  done
  local host=${listen%:*} port=${listen##*:}
  host=${host#[}
  host=${host%]}
  [ -n "$host" ] || host=127.0.0.1
  [ "$host" != 0.0.0.0 ] || host=127.0.0.1
  [ "$host" != "::" ] || host=::1
  [ "$port" != 0 ] || return 0
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "Port $port on $host is already taken by another program (another hots3 still running?)." >&2
    echo "Stop it, or start hots3 on another port:  packaging/setup.sh run --listen 127.0.0.1:$((port + 1))" >&2
    exit 1
  fi
}

# Every fuzz harness for FUZZ_SECONDS, two at a time; a crash fails its test and leaves the
# input in build/fuzz/tests/fuzz/crashes/ (tests/fuzz/README.md says what to do with it).
fuzz() {
  log "Fuzzing, $FUZZ_SECONDS s per harness"
  H3_FUZZ_SECONDS=$FUZZ_SECONDS run_ctest "$FUZZ_DIR" fuzz
}

case "$MODE" in
  run)
    shift
    check_port "$@"
    if [ -d "$ROOT/data" ]; then
      log "Reusing ./data: its objects and its development credentials (./data/credentials) stay; remove ./data to start afresh"
    fi
    install_packages "${BUILD_PACKAGES[@]}" "${RUN_PACKAGES[@]}"
    configure "$RELEASE_DIR" "${RELEASE_BUILD_OPTIONS[@]}"
    build "$RELEASE_DIR" hots3
    if [ "$STOP" = configure ]; then
      would "$RELEASE_DIR/src/hots3" serve --data "$ROOT/data" "$@"
      exit 0
    fi
    log "Starting hots3 (data in ./data; Ctrl-C to stop)"
    exec "$RELEASE_DIR/src/hots3" serve --data "$ROOT/data" "$@"
    ;;
  test)
    install_packages "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}"
    # Debian starts the prometheus service it installs; the tests start their own, on ports of
    # their own, and need none running.
    if [ "$STOP" != configure ] && command -v systemctl >/dev/null &&
      systemctl is-enabled --quiet prometheus 2>/dev/null; then
      as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
    install_node
    configure "$RELEASE_DIR" "${RELEASE_BUILD_OPTIONS[@]}" -DNODE_EXECUTABLE="$NODE_BIN"
    configure "$ASAN_DIR" "${ASAN_BUILD_OPTIONS[@]}" -DNODE_EXECUTABLE="$NODE_BIN"
    configure_fuzz
    build "$RELEASE_DIR"
    build "$ASAN_DIR"
    build "$FUZZ_DIR" hots3-fuzzers
    if [ "$STOP" = configure ]; then
      would ctest --test-dir "$RELEASE_DIR" -L '.*'
      would ctest --test-dir "$ASAN_DIR" -L 'unit|integration' ${SANITIZE_EXCLUDED:+-LE "$SANITIZE_EXCLUDED"}
      would ctest --test-dir "$FUZZ_DIR" -L fuzz
      exit 0
    fi
    run_ctest "$RELEASE_DIR" '.*'
    # The client suites (label clients) run in the release build only, unless SANITIZE_ALL=1:
    # the server paths they reach are those the other suites drive, and the run stays short.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_ctest "$ASAN_DIR" 'unit|integration' "$SANITIZE_EXCLUDED"
    fuzz
    echo
    echo "release, sanitizer and fuzz runs together:"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
    ;;
  fuzz)
    install_packages "${BUILD_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}"
    configure_fuzz
    build "$FUZZ_DIR" hots3-fuzzers
    if [ "$STOP" = configure ]; then
      would ctest --test-dir "$FUZZ_DIR" -L fuzz
      exit 0
    fi
    fuzz
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
    ;;
  bench)
    install_packages "${BUILD_PACKAGES[@]}" "${BENCH_PACKAGES[@]}"
    configure "$RELEASE_DIR" "${RELEASE_BUILD_OPTIONS[@]}"
    # Everything, tests included: bench/http/run.sh drives tests/hots3-http-test-server.
    build "$RELEASE_DIR"
    if [ "$STOP" = configure ]; then
      would "$ROOT/bench/run.sh" build/release
      exit 0
    fi
    exec "$ROOT/bench/run.sh" build/release
    ;;
  *)
    echo "usage: $0 run [hots3 serve options] | test | fuzz | bench" >&2
    exit 64
    ;;
esac
