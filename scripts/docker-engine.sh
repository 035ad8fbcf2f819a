#!/usr/bin/env bash
# The private Docker Engine of the test suite and CI, and its test images, built locally.
#
# Usage: scripts/docker-engine.sh start|stop|image|env
#   start  Installs Debian's docker.io with apt-get when dockerd is missing (needs root), then
#          starts a private daemon: socket, data root, exec root, pidfile and log all under
#          $SKILLRUNTIME_DOCKER_DIR (default /tmp/skillruntime-docker), no bridge and no iptables
#          rules (containers get no network but their own loopback), its own containerd.
#          The data root (images, container layers, volumes) is a tmpfs of at most
#          $SKILLRUNTIME_DOCKER_TMPFS_SIZE (default 4g): the test images are built again at
#          every start anyway, and on disk the engine's layer and volume work made the Docker
#          tests wait for I/O (a quarter of their time on a 2-core machine). When the tmpfs
#          cannot be mounted, or with SKILLRUNTIME_DOCKER_TMPFS=0, the data root is on disk.
#          With SKILLRUNTIME_DOCKER_TCP=127.0.0.1:PORT the daemon also listens on that TCP address
#          (plain, no TLS: for loopback only), as a remote engine is reached; unset, only the socket.
#          Waits until the daemon answers (at most $SKILLRUNTIME_DOCKER_START_TIMEOUT seconds,
#          default 60). Does nothing when that daemon already answers.
#   stop   Stops the daemon that `start` started in that directory (its pidfile; the process must
#          be a dockerd serving that socket), the containerd and shims of that exec root, unmounts
#          what is mounted under the directory and removes it. Never touches another daemon.
#   image  Builds the test images with `docker import` (no registry): a root file system from
#          Debian packages (busybox-static with its applet links, bash-static), /etc/passwd and
#          /etc/group with root and a non-root user `skill` (uid and gid 1000), /tmp mode 1777.
#          skillruntime-test:<hash> and :latest; skillruntime-test-python:<hash> and :latest add
#          python3.11 (minimal and standard library) for suites that run Python in the container.
#          <hash> is a content hash of this script and the packages; a present tag is not built
#          again. The .debs are cached in ~/.cache/skillruntime/debs. The daemon is $DOCKER_HOST
#          when set, else the private one.
#   env    Prints the shell exports for the private daemon and the images (eval "$(... env)").
#
# On failure: one line on stderr saying what failed, and a non-zero exit status.
set -euo pipefail

DIR=${SKILLRUNTIME_DOCKER_DIR:-/tmp/skillruntime-docker}
SOCKET=$DIR/docker.sock
PIDFILE=$DIR/docker.pid
DATA=$DIR/data
EXEC=$DIR/exec
LOG=$DIR/dockerd.log
START_TIMEOUT=${SKILLRUNTIME_DOCKER_START_TIMEOUT:-60}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/skillruntime/debs
IMAGE=skillruntime-test
PYTHON_IMAGE=skillruntime-test-python
BASE_PACKAGES=(busybox-static bash-static)
PYTHON_PACKAGES=(libc6 zlib1g libexpat1 libssl3 libbz2-1.0 liblzma5 libffi8
    libpython3.11-minimal libpython3.11-stdlib python3.11-minimal)
SELF=$(readlink -f "${BASH_SOURCE[0]}")

fail() {
    printf 'docker-engine: %s\n' "$*" >&2
    exit 1
}

log() {
    printf 'docker-engine: %s\n' "$*" >&2
}

# ---------------------------------------------------------------- the daemon

answers() { # HOST: the daemon at HOST answers the API
    timeout 10 docker --host "$1" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

our_pid() { # prints the pid of the daemon started in $DIR, if it still runs
    [ -f "$PIDFILE" ] || return 1
    local pid
    pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    local cmdline
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1 # it may end meanwhile
    case $cmdline in
    *dockerd*"unix://$SOCKET "*) printf '%s\n' "$pid" ;;
    *) return 1 ;;
    esac
}

why() { # the daemon's reason, from its log: its fatal line, else its last error, else its last line
    local line
    line=$(grep -m1 'level=fatal' "$LOG" 2>/dev/null ||
        grep -iE 'level=error|failed' "$LOG" 2>/dev/null | tail -n1 ||
        tail -n1 "$LOG" 2>/dev/null || true)
    printf '%s\n' "${line:-no message}" | cut -c1-240
}

install_engine() {
    command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 && return 0
    [ "$(id -u)" -eq 0 ] || fail "dockerd is not installed and installing docker.io needs root"
    log "installing Debian's docker.io"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || fail "apt-get update failed (installing docker.io)"
    apt-get install -y -qq --no-install-recommends docker.io >/dev/null 2>&1 ||
        fail "apt-get install docker.io failed"
    command -v dockerd >/dev/null 2>&1 || fail "docker.io is installed but dockerd is not on PATH"
}

start() {
    if our_pid >/dev/null && answers "unix://$SOCKET"; then
        return 0
    fi
    install_engine
    if our_pid >/dev/null; then # started earlier but not answering: start it again
        stop_daemon
    fi
    mkdir -p "$DIR"
    [ "${#EXEC}" -lt 60 ] || fail "SKILLRUNTIME_DOCKER_DIR is too long for the daemon's sockets: $DIR"
    local namespace
    namespace=skillruntime-$(printf '%s' "$DIR" | sha256sum | cut -c1-12)
    : >"$LOG"
    local -a tcp=()
    if [ -n "${SKILLRUNTIME_DOCKER_TCP:-}" ]; then
        tcp=(--host "tcp://$SKILLRUNTIME_DOCKER_TCP")
    fi
    mount_data
    # setsid: the daemon outlives the shell that started it and its signals (stop ends it).
    setsid dockerd \
        --host "unix://$SOCKET" \
        "${tcp[@]}" \
        --data-root "$DATA" \
        --exec-root "$EXEC" \
        --pidfile "$PIDFILE" \
        --containerd-namespace "$namespace" \
        --containerd-plugins-namespace "$namespace-plugins" \
        --iptables=false --ip6tables=false --bridge=none --shutdown-timeout 5 \
        >>"$LOG" 2>&1 </dev/null &
    local launched=$! waited=0
    while ! answers "unix://$SOCKET"; do
        if ! kill -0 "$launched" 2>/dev/null; then
            stop_daemon
            unmount_data
            fail "the private Docker daemon did not start: $(why) (log: $LOG)"
        fi
        if [ "$waited" -ge $((START_TIMEOUT * 2)) ]; then
            kill -TERM "$launched" 2>/dev/null || true
            stop_daemon
            unmount_data
            fail "the private Docker daemon did not answer within ${START_TIMEOUT}s (log: $LOG)"
        fi
        sleep 0.5
        waited=$((waited + 1)) # half-seconds
    done
    log "private daemon up: unix://$SOCKET"
}

# The data root as a tmpfs (see the usage above); on disk when that is off or cannot be mounted.
mount_data() {
    mkdir -p "$DATA"
    if [ "${SKILLRUNTIME_DOCKER_TMPFS:-1}" = 0 ] || mountpoint -q "$DATA"; then
        return 0
    fi
    local size=${SKILLRUNTIME_DOCKER_TMPFS_SIZE:-4g}
    if ! mount -t tmpfs -o "size=$size,mode=0710" skillruntime-docker "$DATA" 2>/dev/null; then
        log "the data root is on disk: a tmpfs of $size could not be mounted on $DATA"
    fi
}

unmount_data() {
    if mountpoint -q "$DATA" 2>/dev/null; then
        umount -l "$DATA" 2>/dev/null || true
    fi
}

# The processes of this exec root: its containerd and the shims of its containers.
exec_root_pids() {
    local pid cmdline
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ -r "/proc/$pid/cmdline" ] || continue
        # stderr first: a process that ends between the test and the read is no error
        cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || continue
        case $cmdline in
        *containerd*"$EXEC/"*) printf '%s\n' "$pid" ;;
        esac
    done
}

stop_daemon() {
    local pid waited=0
    if pid=$(our_pid); then
        kill -TERM "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 40 ]; do
            sleep 0.5
            waited=$((waited + 1))
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    local rest
    rest=$(exec_root_pids)
    if [ -n "$rest" ]; then
        # shellcheck disable=SC2086
        kill -TERM $rest 2>/dev/null || true
        sleep 1
        # shellcheck disable=SC2086
        kill -KILL $(exec_root_pids) 2>/dev/null || true
    fi
}

stop() {
    stop_daemon
    [ -d "$DIR" ] || return 0
    local mounts
    mounts=$(awk -v dir="$DIR/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r)
    local mount
    for mount in $mounts; do
        umount -l "$mount" 2>/dev/null || true
    done
    rm -rf "$DIR"
}

# ---------------------------------------------------------------- the images

engine_host() {
    printf '%s\n' "${DOCKER_HOST:-unix://$SOCKET}"
}

fetch_debs() { # PACKAGE...: prints the cached .deb of each, downloading the missing ones
    mkdir -p "$CACHE"
    local package found updated=0
    for package in "$@"; do
        found=$(find "$CACHE" -maxdepth 1 -name "${package}_*.deb" | sort | tail -n1)
        if [ -z "$found" ]; then
            if ! (cd "$CACHE" && apt-get download -qq "$package" >/dev/null 2>&1); then
                if [ "$updated" -eq 0 ] && [ "$(id -u)" -eq 0 ]; then
                    apt-get update -qq >/dev/null 2>&1 || true
                    updated=1
                fi
                (cd "$CACHE" && apt-get download -qq "$package" >/dev/null 2>&1) ||
                    fail "apt-get download $package failed"
            fi
            found=$(find "$CACHE" -maxdepth 1 -name "${package}_*.deb" | sort | tail -n1)
            [ -n "$found" ] || fail "apt-get download $package left no ${package}_*.deb"
        fi
        printf '%s\n' "$found"
    done
}

content_hash() { # DEB...: the hash naming an image of these packages built by this script
    { sha256sum "$SELF" | cut -d' ' -f1; sha256sum "$@" | cut -d' ' -f1; } | sha256sum | cut -c1-12
}

base_root() { # ROOT DEB...: the busybox and bash root file system in ROOT
    local root=$1 deb
    shift
    for deb in "$@"; do
        dpkg -x "$deb" "$root"
    done
    mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/etc" \
        "$root/root" "$root/home/skill" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" \
        "$root/var/tmp"
    # The applets as links to busybox, where the packages put nothing.
    local applet
    for applet in $("$root/bin/busybox" --list-full); do
        mkdir -p "$root/$(dirname "$applet")"
        [ -e "$root/$applet" ] || [ -L "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
    done
    ln -sf bash-static "$root/bin/bash"
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'skill:x:1000:1000:skill:/home/skill:/bin/sh' \
        >"$root/etc/passwd"
    printf '%s\n' 'root:x:0:' 'skill:x:1000:' >"$root/etc/group"
    chown 1000:1000 "$root/home/skill"
    chmod 0700 "$root/root"
    chmod 1777 "$root/tmp" "$root/var/tmp"
}

python_root() { # ROOT DEB...: the Python packages added to a base root in ROOT
    local root=$1 deb
    shift
    for deb in "$@"; do
        dpkg -x "$deb" "$root"
    done
    ln -sf python3.11 "$root/usr/bin/python3"
    ln -sf python3.11 "$root/usr/bin/python"
}

build() { # NAME HASH KIND DEB...: imports the image NAME:HASH unless present; tags NAME:latest
    local name=$1 hash=$2 kind=$3
    shift 3
    local host
    host=$(engine_host)
    if ! docker --host "$host" image inspect "$name:$hash" >/dev/null 2>&1; then
        local root
        root=$(mktemp -d "${TMPDIR:-/tmp}/skillruntime-rootfs.XXXXXX")
        # shellcheck disable=SC2064
        trap "rm -rf '$root'" RETURN
        local -a base=() python=()
        local deb
        for deb in "$@"; do
            case $(basename "$deb") in
            busybox-static_* | bash-static_*) base+=("$deb") ;;
            *) python+=("$deb") ;;
            esac
        done
        base_root "$root" "${base[@]}"
        if [ "$kind" = python ]; then
            python_root "$root" "${python[@]}"
        fi
        tar -C "$root" --numeric-owner -cf - . |
            docker --host "$host" import \
                --change 'CMD ["/bin/sh"]' \
                --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
                --change "LABEL org.skillruntime.test-image=$hash" \
                - "$name:$hash" >/dev/null || fail "docker import of $name:$hash failed"
        log "built $name:$hash"
    fi
    docker --host "$host" tag "$name:$hash" "$name:latest" || fail "docker tag $name:latest failed"
}

image() {
    command -v docker >/dev/null 2>&1 || fail "the docker client is not installed (start installs it)"
    answers "$(engine_host)" || fail "no Docker daemon answers at $(engine_host)"
    local -a base python
    mapfile -t base < <(fetch_debs "${BASE_PACKAGES[@]}")
    mapfile -t python < <(fetch_debs "${PYTHON_PACKAGES[@]}")
    [ "${#base[@]}" -eq "${#BASE_PACKAGES[@]}" ] || fail "the base packages could not be fetched"
    [ "${#python[@]}" -eq "${#PYTHON_PACKAGES[@]}" ] || fail "the Python packages could not be fetched"
    build "$IMAGE" "$(content_hash "${base[@]}")" base "${base[@]}"
    build "$PYTHON_IMAGE" "$(content_hash "${base[@]}" "${python[@]}")" python \
        "${base[@]}" "${python[@]}"
}

env_exports() {
    printf 'export DOCKER_HOST=%q\n' "unix://$SOCKET"
    printf 'export SKILLRUNTIME_DOCKER_TEST_IMAGE=%q\n' "$IMAGE:latest"
    printf 'export SKILLRUNTIME_DOCKER_TEST_PYTHON_IMAGE=%q\n' "$PYTHON_IMAGE:latest"
}

case ${1:-} in
start) start ;;
stop) stop ;;
image) image ;;
env) env_exports ;;
*)
    printf 'usage: %s start|stop|image|env\n' "$0" >&2
    exit 2
    ;;
esac
