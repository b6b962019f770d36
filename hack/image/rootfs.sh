#!/usr/bin/env bash
# Assembles the runtime root filesystem of the poolboy image into DEST: the binary as
# /usr/local/bin/poolboy, the shared libraries it loads (found with ldd, kept at their paths),
# and /etc/passwd and /etc/group naming the non-root user 65532 ("nonroot"). Nothing else: no
# shell, no package manager.
#
# Used by both image builds, so they have the same layout: the Containerfile (in its build
# stage) and hack/image/build.sh (`make image`, offline, from the host's release build).
#
# Usage: hack/image/rootfs.sh BINARY DEST
set -euo pipefail

binary="$1"
dest="$2"
[[ -x "$binary" ]] || {
  echo "rootfs.sh: $binary is not an executable" >&2
  exit 1
}
rm -rf -- "$dest"
mkdir -p "$dest/usr/local/bin" "$dest/etc" "$dest/tmp"
chmod 1777 "$dest/tmp"
install -m 0755 "$binary" "$dest/usr/local/bin/poolboy"

# ldd prints "name => /path (addr)" for libraries and "/path (addr)" for the loader.
libraries="$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')"
[[ -n "$libraries" ]] || {
  echo "rootfs.sh: ldd found no libraries for $binary (a static binary needs none: check)" >&2
  exit 1
}
for library in $libraries; do
  mkdir -p "$dest$(dirname "$library")"
  # -L: the file itself, not the symlink ldd may name.
  cp -L "$library" "$dest$library"
done

cat >"$dest/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat >"$dest/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
echo "rootfs.sh: $(find "$dest" -type f | wc -l) files, $(du -sh "$dest" | cut -f1) in $dest" >&2
