#!/usr/bin/env bash
# The aarch64 wheel, built and proven without ARM hardware (root; Debian's debootstrap and
# qemu-user-static). `make wheels-aarch64` and `make prove-aarch64` call it.
#
#   scripts/aarch64.sh build   cross-compile the abi3 manylinux aarch64 wheel into dist/, in a
#                              Debian trixie amd64 root (its rustc 1.85 with the arm64 std; zig
#                              links against glibc 2.17)
#   scripts/aarch64.sh prove   in a Debian trixie arm64 root under qemu-user-static: the native
#                              crate's tests, the wheel installed with the server extra, a
#                              client/server smoke test, and the claim micro-benchmark (emulated)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOTS=${PYQUEUE_ROOTS:-/var/tmp/pqroots}
MIRROR=http://deb.debian.org/debian
X64=$ROOTS/x64
ARM=$ROOTS/arm64
mkdir -p "$ROOTS" dist

in_root() {  # in_root ROOT COMMAND...: run in the root with the project at /src
  local root=$1; shift
  mkdir -p "$root/src" "$root/proc"
  mountpoint -q "$root/src" || mount --bind "$PWD" "$root/src"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # The host's CA bundle: it holds whatever CA this network's HTTPS goes through (PyPI, crates.io).
  mkdir -p "$root/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca.crt"
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/host-ca.crt SSL_CERT_FILE=/etc/ssl/host-ca.crt CARGO_HTTP_CAINFO=/etc/ssl/host-ca.crt "$@"
}

release() {
  for root in "$X64" "$ARM"; do
    for m in src proc; do mountpoint -q "$root/$m" && umount "$root/$m" || true; done
  done
}
trap release EXIT

binfmt() {
  command -v qemu-aarch64-static >/dev/null || apt-get install -y -qq qemu-user-static binfmt-support
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
}

build() {
  binfmt
  [ -x "$X64/usr/bin/apt-get" ] || debootstrap --variant=minbase --include=ca-certificates trixie "$X64" "$MIRROR"
  if [ ! -x "$X64/opt/venv/bin/auditwheel" ]; then
    in_root "$X64" sh -c 'dpkg --add-architecture arm64 && apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc cargo libstd-rust-dev:arm64 gcc-aarch64-linux-gnu python3-venv &&
      python3 -m venv /opt/venv && /opt/venv/bin/pip install -q maturin ziglang auditwheel'
  fi
  in_root "$X64" sh -c 'cd /src && PATH=/opt/venv/bin:$PATH CARGO_TARGET_DIR=/root/target \
    maturin build --release --zig --target aarch64-unknown-linux-gnu --compatibility manylinux2014 --out /src/dist &&
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc cargo test \
      --manifest-path native/Cargo.toml --release --target aarch64-unknown-linux-gnu --no-run \
      --target-dir /root/target 2>&1 | grep -o "/root/target/[^ )]*" > /root/native-tests'
  in_root "$X64" sh -c '/opt/venv/bin/auditwheel show /src/dist/pyqueue-*aarch64.whl'
  rm -rf dist/aarch64-native-tests && mkdir -p dist/aarch64-native-tests
  while read -r binary; do cp "$X64$binary" dist/aarch64-native-tests/; done < "$X64/root/native-tests"
}

prove() {
  binfmt
  [ -x "$ARM/usr/bin/python3" ] || debootstrap --arch=arm64 --variant=minbase \
    --include=ca-certificates,python3,python3-venv trixie "$ARM" "$MIRROR"
  local wheel
  wheel=$(ls dist/pyqueue-*-manylinux*aarch64.whl | head -1)
  in_root "$ARM" sh -c "uname -m && for t in /src/dist/aarch64-native-tests/*; do \$t -q; done"
  in_root "$ARM" sh -c "rm -rf /opt/venv && python3 -m venv /opt/venv &&
    /opt/venv/bin/pip install -q '/src/$wheel[server]' pytest pytest-benchmark"
  in_root "$ARM" /opt/venv/bin/python /src/scripts/smoke.py
  # The bench file alone, outside the checkout (whose pyqueue/ holds the x86_64 extension).
  in_root "$ARM" sh -c "cp /src/bench/test_native_ready.py /tmp/bench_ready.py && cd /tmp &&
    /opt/venv/bin/python -m pytest -q -p no:cacheprovider --benchmark-only --benchmark-columns=median,iqr,rounds \
      'bench_ready.py::test_claim_with_jobs_blocked_by_limits[0]' 'bench_ready.py::test_claim_with_keys_blocked_by_their_cap[0]'"
}

"$@"
