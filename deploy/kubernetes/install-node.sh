#!/bin/sh
# install-node.sh: the container of the cumemcap DaemonSet (daemonset.yaml).
#
# Puts the cumemcap install of this image onto the node, whole or not at
# all, then keeps the node's configuration file in step with the ConfigMap.
# On the node (paths as the DaemonSet mounts them):
#
#   /opt/cumemcap/releases/ID/    one release: bin/ lib/ libexec/ ... (ID: version-hash)
#   /opt/cumemcap/current         -> releases/ID, the one pods mount
#   /opt/cumemcap/{bin,lib,libexec,share} -> current/..., so the paths built
#                                 into the launcher work on the node itself
#   /etc/cumemcap/cumemcap.conf   the ConfigMap's cumemcap.conf, once it passed
#                                 `cumemcap --check-config`
#   /var/log/cumemcap, /var/lib/prometheus/node-exporter
#                                 made, mode 1777, for pods of any uid
#
# Nothing appears half-made: the first install is built in a hidden
# directory beside /opt/cumemcap and renamed into place; a later release is
# built in releases/.tmp.* and renamed, then `current` is replaced by a
# rename of a new link; the configuration is copied to a hidden file and
# renamed. A pod that starts meanwhile sees the old state or the new one;
# before the first install, its hostPath volumes (type Directory / File)
# do not exist, so the kubelet holds it until they do.
#
# Releases are never removed here: a running pod has its release mounted
# (removing the directory would empty it under the pod). docs/kubernetes.md
# says how to remove old ones.
#
# Settings (environment; the defaults are the DaemonSet's mounts):
#   CUMEMCAP_IMAGE_TREE   the install in this image (/opt/cumemcap)
#   CUMEMCAP_NODE_OPT     the node's /opt (/host/opt)
#   CUMEMCAP_NODE_ETC     the node's /etc/cumemcap (/host/etc/cumemcap)
#   CUMEMCAP_CONFIGMAP    the ConfigMap's file (/config/cumemcap.conf)
#   CUMEMCAP_SHARED_DIRS  directories made for logs and metrics
#                         (/host/var/log/cumemcap /host/var/lib/prometheus/node-exporter)
#   CUMEMCAP_SHARED_MODE  their mode (1777; 0755 when every pod runs as root)
#   CUMEMCAP_SYNC_SECONDS how often the ConfigMap is looked at (30)
#   CUMEMCAP_CHECK        the command that checks a configuration file
#                         (CUMEMCAP_IMAGE_TREE/bin/cumemcap --check-config)
#   CUMEMCAP_INSTALL_ONCE 1: install, then exit (tests; an init container)
set -eu

IMAGE_TREE=${CUMEMCAP_IMAGE_TREE:-/opt/cumemcap}
NODE_OPT=${CUMEMCAP_NODE_OPT:-/host/opt}
NODE_ETC=${CUMEMCAP_NODE_ETC:-/host/etc/cumemcap}
CONFIGMAP=${CUMEMCAP_CONFIGMAP:-/config/cumemcap.conf}
SHARED_DIRS=${CUMEMCAP_SHARED_DIRS:-/host/var/log/cumemcap /host/var/lib/prometheus/node-exporter}
SHARED_MODE=${CUMEMCAP_SHARED_MODE:-1777}
SYNC_SECONDS=${CUMEMCAP_SYNC_SECONDS:-30}
CHECK=${CUMEMCAP_CHECK:-$IMAGE_TREE/bin/cumemcap --check-config}
ONCE=${CUMEMCAP_INSTALL_ONCE:-0}

say() { printf 'cumemcap-install-node: %s\n' "$*" >&2; }

trap 'exit 0' TERM INT

# The release's name: the version and a hash of its files, so the same
# image installs once and a rebuilt one installs beside it.
release_id() {
	version=$("$IMAGE_TREE/bin/cumemcap" --version | sed -n '1s/^cumemcap //p')
	hash=$(cd "$IMAGE_TREE" && find . \( -type f -o -type l \) -print | LC_ALL=C sort |
		while IFS= read -r f; do
			printf '%s\n' "$f"
			if [ -L "$f" ]; then readlink "$f"; else cksum < "$f"; fi
		done | sha256sum | cut -c1-12)
	[ -n "$version" ] || { say "$IMAGE_TREE/bin/cumemcap --version: no version"; exit 1; }
	printf '%s-%s\n' "$version" "$hash"
}

# Replace (or make) the link $1 -> $2 by renaming a new link over it.
swap_link() {
	ln -sfn "$2" "$1.tmp.$$"
	mv -Tf "$1.tmp.$$" "$1"
}

install_release() {
	id=$(release_id)
	top=$NODE_OPT/cumemcap
	if [ ! -d "$top" ]; then
		# First install: the whole tree beside it, then one rename.
		rm -rf "$NODE_OPT"/.cumemcap.tmp.*
		tmp=$NODE_OPT/.cumemcap.tmp.$$
		mkdir -p "$tmp/releases/$id"
		cp -a "$IMAGE_TREE/." "$tmp/releases/$id/"
		ln -s "releases/$id" "$tmp/current"
		for d in bin lib libexec share; do
			[ -e "$tmp/releases/$id/$d" ] && ln -s "current/$d" "$tmp/$d"
		done
		sync
		mv -T "$tmp" "$top"
		say "installed $id in $top"
		return
	fi
	if [ ! -d "$top/releases/$id" ]; then
		mkdir -p "$top/releases"
		rm -rf "$top"/releases/.tmp.*
		tmp=$top/releases/.tmp.$id.$$
		mkdir "$tmp"
		cp -a "$IMAGE_TREE/." "$tmp/"
		sync
		mv -T "$tmp" "$top/releases/$id"
		say "added release $id in $top/releases"
	fi
	if [ "$(readlink "$top/current" 2>/dev/null || true)" != "releases/$id" ]; then
		swap_link "$top/current" "releases/$id"
		say "$top/current -> releases/$id"
	fi
	for d in bin lib libexec share; do
		if [ -e "$top/releases/$id/$d" ] && [ "$(readlink "$top/$d" 2>/dev/null || true)" != "current/$d" ]; then
			swap_link "$top/$d" "current/$d"
		fi
	done
}

# The ConfigMap's file onto the node when it changed and passes the check;
# a file that fails it leaves the node's previous one (every program that
# reads a wrong file stops before main).
sync_config() {
	if [ ! -f "$CONFIGMAP" ]; then
		say "$CONFIGMAP: no such file (is the ConfigMap mounted?)"
		return 1
	fi
	dst=$NODE_ETC/cumemcap.conf
	if [ -f "$dst" ] && cmp -s "$CONFIGMAP" "$dst"; then
		return 0
	fi
	if ! out=$($CHECK "$CONFIGMAP" 2>&1); then
		say "the ConfigMap's cumemcap.conf is not valid; $dst is left as it was:"
		printf '%s\n' "$out" >&2
		return 1
	fi
	mkdir -p "$NODE_ETC"
	tmp=$NODE_ETC/.cumemcap.conf.tmp.$$
	cp "$CONFIGMAP" "$tmp"
	chmod 0644 "$tmp"
	mv -f "$tmp" "$dst"
	say "installed $dst ($out)"
}

# A directory root does not own (Debian's prometheus-node-exporter package
# makes its textfile directory prometheus's) cannot be changed by a root
# with no capability: said, and left as it is.
make_shared_dirs() {
	for d in $SHARED_DIRS; do
		if ! { mkdir -p "$d" && chmod "$SHARED_MODE" "$d"; }; then
			say "$d: could not make it mode $SHARED_MODE; pods whose uid cannot write there run without it"
		fi
	done
}

make_shared_dirs
# The configuration first: a pod needs both, and waits for both.
conf_ok=1
sync_config || conf_ok=0
install_release
if [ "$ONCE" = 1 ]; then
	[ "$conf_ok" = 1 ] || exit 1
	exit 0
fi
while :; do
	sleep "$SYNC_SECONDS" &
	wait $! || true
	sync_config || true
done
