#!/bin/sh
# Puts the `toolgate` command of this checkout on the PATH of every new shell, so the
# commands the docs show work as written after `make run` or `make test`: a symbolic link
# to .venv/bin/toolgate in the first folder of ~/.local/bin and /usr/local/bin that is on
# PATH and writable. A `toolgate` there that is not a link into some checkout's .venv
# (an installed release, say) is left alone. LINK=0 links nothing.
# Usage: link-cli.sh PATH/TO/.venv/bin/toolgate
set -eu
target=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ "${LINK:-1}" = 0 ] && exit 0
for folder in "$HOME/.local/bin" /usr/local/bin; do
  case ":$PATH:" in *":$folder:"*) ;; *) continue ;; esac
  [ -d "$folder" ] && [ -w "$folder" ] || continue
  link="$folder/toolgate"
  if [ -e "$link" ] || [ -L "$link" ]; then
    current=$(readlink "$link" || true)
    case "$current" in
      "$target") exit 0 ;;
      */.venv/bin/toolgate) ;;  # another checkout's: this one replaces it
      *) echo "toolgate: $link exists and is not a checkout's; not replaced" >&2; exit 0 ;;
    esac
  fi
  ln -sfn "$target" "$link"
  echo "toolgate: linked $link -> $target (the docs' commands work in any new shell)"
  exit 0
done
echo "toolgate: no writable folder of the PATH for the command; run" \
  "'export PATH=\"$(dirname "$target"):\$PATH\"' (or 'source .venv/bin/activate') in each new shell"
