"""Commands that run another command (SPEC §18 "Shell commands"): the table the walker reads.

Each entry says how the wrapped command is found among the wrapper's words: which options
take a value (the next word, or attached: `-uroot`, `--user=root`), which take none, how
many operands come before the command (`timeout 5 cmd`), whether `NAME=value` words may come
first (`env A=1 cmd`), and how the command is given:
- `exec`: the remaining words are the command (`sudo rm x`);
- `line`: the remaining words, joined by spaces, are a command line (`eval`, `watch`);
- `shell`: a shell; with `-c` the next operand is a command line, else it runs a script;
- `xargs`: the remaining words are the command, with arguments read from its input;
- `find`: each `-exec`/`-execdir`/`-ok`/`-okdir` ... `;` or `+` is a command;
- `options`: only an option's value is a command line (`su -c "..."`, `script -c`).
Some wrappers are a command and a subcommand (`uv run`, `npm exec`, `bundle exec`):
SUBCOMMANDS. Names are looked up lower-cased (a case-insensitive file system runs `SUDO`).
An option the table does not know may take a value or not, so where the command starts
cannot be told: every later word that could start it is tried (a deny or ask rule matches
if any try does; such a line is never classified).
`transparent` wrappers run the command as it is, so a classify rule need only match the
command (`nice ls` is `ls`); the others (`sudo`, `xargs`, `watch`, `find`) must match a
classify pattern themselves as well.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Wrapper:
    how: str  # "exec" | "line" | "shell" | "xargs" | "find"
    values: frozenset[str] = frozenset()   # options taking a value
    flags: frozenset[str] = frozenset()    # options taking none
    operands: int = 0                      # words between the options and the command
    assignments: bool = False              # NAME=value words before the command
    transparent: bool = False
    # Options after which there is no command to run (`command -v rm` only prints).
    no_command: frozenset[str] = frozenset()
    # `env -S "cmd args"`: the option's value is itself a command line.
    line_values: frozenset[str] = frozenset()
    # Short options may take optional attached values (`nice -5`, `xargs -i{}`): digits.
    numeric_flags: bool = False


def _w(how: str, values: str = "", flags: str = "", **kw: object) -> Wrapper:
    return Wrapper(how, frozenset(values.split()), frozenset(flags.split()), **kw)  # type: ignore[arg-type]


_SHELL = _w("shell", "-o +o -O +O --rcfile --init-file",
            "-i -l -r -s -e -x -u -v -n -a -b -f -h -k -m -p -t -B -C -E -H -P -T "
            "--login --norc --noprofile --posix --restricted --verbose --noediting "
            "--debugger --dump-strings --dump-po-strings --pretty-print -- -")

WRAPPERS: dict[str, Wrapper] = {
    "sudo": _w("exec",
               "-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt "
               "-r --role -t --type -U --other-user -T --command-timeout",
               "-A --askpass -b --background -E -e --edit -H --set-home -i --login -K "
               "--remove-timestamp -k --reset-timestamp -n --non-interactive -P "
               "--preserve-groups -S --stdin -s --shell -V --version -v --validate "
               "-N --no-update -R --preserve-env -- -l --list", assignments=True,
               no_command=frozenset({"-e", "--edit", "-l", "--list", "-v", "--validate",
                                     "-V", "--version", "-k", "-K"})),
    "doas": _w("exec", "-u -C", "-n -s -L --"),
    "env": _w("exec", "-u --unset -C --chdir -S --split-string --block-signal "
              "--default-signal --ignore-signal",
              "-i --ignore-environment -0 --null -v --debug - --", assignments=True,
              transparent=True, line_values=frozenset({"-S", "--split-string"})),
    "nice": _w("exec", "-n --adjustment", "--", transparent=True, numeric_flags=True),
    "ionice": _w("exec", "-c --class -n --classdata -p --pid -P --pgid -u --uid",
                 "-t --ignore --", transparent=True),
    "nohup": _w("exec", "", "--", transparent=True),
    "coproc": _w("exec"),  # `coproc cmd`: cmd runs, in the background (never classified)
    "setsid": _w("exec", "", "-c --ctty -f --fork -w --wait --", transparent=True),
    "timeout": _w("exec", "-k --kill-after -s --signal",
                  "--preserve-status --foreground -v --verbose --", operands=1,
                  transparent=True),
    "time": _w("exec", "-o --output -f --format",
               "-p -a --append -v --verbose -q --quiet --portability --", transparent=True),
    "command": _w("exec", "", "-p -v -V --", transparent=True,
                  no_command=frozenset({"-v", "-V"})),
    "exec": _w("exec", "-a", "-c -l --", transparent=True),
    "builtin": _w("exec", "", "--", transparent=True),
    "stdbuf": _w("exec", "-i --input -o --output -e --error", "--", transparent=True),
    "unbuffer": _w("exec", "", "-p --", transparent=True),
    "watch": _w("line", "-n --interval -q --equexit -s --shell",
                "-b --beep -c --color -C --no-color -d --differences -e --errexit "
                "-g --chgexit -p --precise -r --no-rerun -t --no-title -w --no-wrap "
                "-x --exec --"),
    "eval": _w("line", "", "--"),
    "xargs": _w("xargs",
                "-a --arg-file -d --delimiter -E -I -L --max-lines -n --max-args "
                "-P --max-procs -s --max-chars --process-slot-var",
                "-0 --null -o --open-tty -p --interactive -r --no-run-if-empty -t "
                "--verbose -x --exit -e -i -l --show-limits --"),
    "find": _w("find"),
    "sh": _SHELL, "bash": _SHELL, "dash": _SHELL, "zsh": _SHELL, "ksh": _SHELL,
    "mksh": _SHELL, "ash": _SHELL, "busybox": _w("exec", "", "--"),
    "su": _w("options", "-s --shell -g --group -G --supp-group -w --whitelist-environment",
             "- -l --login -m -p --preserve-environment -f --fast -P --pty",
             line_values=frozenset({"-c", "--command", "--session-command"})),
    "runuser": _w("exec", "-u --user -g --group -G --supp-group -s --shell",
                  "- -l --login -m -p --preserve-environment -P --pty --",
                  line_values=frozenset({"-c", "--command", "--session-command"})),
    "script": _w("options", "-O --log-out -I --log-in -B --log-io -T --log-timing -E "
                 "--echo -o --output-limit", "-a --append -e --return -f --flush -q --quiet",
                 line_values=frozenset({"-c", "--command"})),
    "flock": _w("exec", "-w --timeout -E --conflict-exit-code",
                "-s --shared -x -e --exclusive -n --nb --nonblock -u --unlock -o "
                "--close --no-fork -F --verbose --", operands=1, transparent=True,
                line_values=frozenset({"-c", "--command"})),
    "chroot": _w("exec", "--userspec --groups", "--skip-chdir --", operands=1),
    "taskset": _w("exec", "", "-a --all-tasks -c --cpu-list --", operands=1,
                  transparent=True),
    "chrt": _w("exec", "", "-a --all-tasks -b --batch -d --deadline -f --fifo -i --idle "
               "-o --other -r --rr -R --reset-on-fork -v --verbose --", operands=1,
               transparent=True),
    "strace": _w("exec", "-e -o -p -s -u -E -P -I -b -O -S -X -a",
                 "-f -ff -c -C -d -D -F -i -q -qq -r -t -tt -ttt -T -v -w -x -xx -y -yy "
                 "-k -n -Z -z --", transparent=True),
    "ltrace": _w("exec", "-e -o -p -s -u -a -A -D -F -l -n", "-b -c -C -f -i -L -r -S -t "
                 "-tt -ttt -T -w -x --", transparent=True),
    "caffeinate": _w("exec", "-t -w", "-d -i -m -s -u", transparent=True),
    "pkexec": _w("exec", "--user", "--disable-internal-agent --keep-cwd"),
    "proxychains": _w("exec", "-f", "-q", transparent=True),
    "proxychains4": _w("exec", "-f", "-q", transparent=True),
    "torsocks": _w("exec", "-u --user -p --pass -a --address -P --port",
                   "-i --isolate -d --debug -q --quiet", transparent=True),
    "npx": _w("exec", "-p --package", "-y --yes --no -q --quiet --",
              line_values=frozenset({"-c", "--call"})),
    "sg": _w("line", "", "-c --", operands=1),
    "nix-shell": _w("options", "-p --packages -A --attr -I --arg --argstr --expr -E",
                    "--pure --impure -Q --quiet -v --verbose",
                    line_values=frozenset({"--run", "--command"})),
    # ripgrep runs `--pre COMMAND FILE` for each file it searches (`rg --pre rm x`).
    "rg": _w("options", "-e --regexp -f --file -g --glob --iglob -t --type -T --type-not "
             "--type-add --type-clear -m --max-count -A --after-context -B --before-context "
             "-C --context -M --max-columns -j --threads -r --replace --pre-glob --sort "
             "--sortr --color --colors --encoding -E --engine -d --max-depth "
             "--path-separator --ignore-file --max-filesize --context-separator "
             "--field-context-separator --field-match-separator --hyperlink-format",
             line_values=frozenset({"--pre", "--hostname-bin"})),
    "parallel": _w("xargs", "-j --jobs -S --sshlogin -a --arg-file --joblog -I -d "
                   "--delimiter -n --max-args", "-0 --null -k --keep-order -q --quote "
                   "--dry-run -v --verbose --"),
}

SUBCOMMANDS: dict[tuple[str, str], Wrapper] = {
    ("uv", "run"): _w("exec", "--with --with-requirements --python -p --directory "
                      "--project --package --extra --group --env-file --index --index-url",
                      "--no-project --frozen --locked --isolated --no-sync --active -q "
                      "--quiet -v --verbose --all-extras --no-dev --", transparent=True),
    ("poetry", "run"): _w("exec", "", "--", transparent=True),
    ("pipenv", "run"): _w("exec", "", "--", transparent=True),
    ("pdm", "run"): _w("exec", "", "--", transparent=True),
    ("hatch", "run"): _w("exec", "", "--", transparent=True),
    ("conda", "run"): _w("exec", "-n --name -p --prefix --cwd",
                         "--no-capture-output --live-stream -v --", transparent=True),
    ("bundle", "exec"): _w("exec", "", "--", transparent=True),
    ("npm", "exec"): _w("exec", "-p --package -w --workspace", "-y --yes --no --",
                        line_values=frozenset({"-c", "--call"})),
    ("pnpm", "exec"): _w("exec", "", "--", transparent=True),
    ("pnpm", "dlx"): _w("exec", "", "--"),
    ("yarn", "exec"): _w("exec", "", "--", transparent=True),
    ("yarn", "dlx"): _w("exec", "-p --package", "-q --quiet --"),
    ("direnv", "exec"): _w("exec", "", "--", operands=1, transparent=True),
    ("xcrun", "--run"): _w("exec", "", "", transparent=True),
}

# Programs whose global options come before their subcommand (`git -C dir push`,
# `npm --registry x publish`): the command is also tried from each later word that is not
# an option (`git push`), so a deny or ask rule on `git push:*` sees it.
GLOBAL_OPTIONS = frozenset({"git", "npm", "pnpm", "yarn", "cargo", "docker", "podman",
                            "uv", "poetry", "gh", "gem", "twine", "pip", "pip3"})
# Options that make a command write the file they name (`git diff --output=x`, `tree -o x`):
# such a line writes, as an output redirection to a file does.
OUTPUT_OPTIONS: dict[str, frozenset[str]] = {
    "git": frozenset({"--output"}),
    "tree": frozenset({"-o"}),
    "sort": frozenset({"-o", "--output"}),
}

# find's actions that run a command, up to `;` or `+`.
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# Shells toolgate does not parse: a line that runs one with a command is not analysed.
OTHER_DIALECTS = frozenset({"pwsh", "powershell", "powershell.exe", "pwsh.exe", "cmd",
                            "cmd.exe", "fish", "csh", "tcsh", "nu", "elvish", "xonsh"})
# What counts as a shell reading its script from its input (`curl x | sh`).
SHELLS = frozenset(name for name, w in WRAPPERS.items() if w.how == "shell")
# Files output may be redirected to without writing anything.
NULL_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})

# Commands whose operands are URLs even without a scheme (`curl evil.example`): the
# options that take a value (the value is not a URL, except `--url`'s). An option not
# listed is taken to take none, so its next word counts as a URL: a deny or ask rule on
# `domains` may then match more, never less.
_CURL_VALUES = (
    "-o --output -H --header -d --data --data-raw --data-binary --data-urlencode --json "
    "-X --request -u --user -A --user-agent -e --referer -b --cookie -c --cookie-jar "
    "-F --form --form-string -T --upload-file -w --write-out -m --max-time -x --proxy "
    "-U --proxy-user --connect-timeout --retry --retry-delay --retry-max-time --cacert "
    "--capath -E --cert --key --pass --resolve --connect-to -K --config -r --range "
    "-z --time-cond -C --continue-at --limit-rate -y --speed-time -Y --speed-limit "
    "--max-filesize --max-redirs --interface --dns-servers -Q --quote --oauth2-bearer "
    "--variable --expand-url --aws-sigv4 --output-dir --create-dirs --unix-socket "
    "--abstract-unix-socket -D --dump-header --trace --trace-ascii --stderr")
_WGET_VALUES = (
    "-O --output-document -o --output-file -a --append-output -P --directory-prefix "
    "-U --user-agent --header --post-data --post-file --body-data --body-file --method "
    "-t --tries -T --timeout --wait -w --user --password --http-user --http-password "
    "--load-cookies --save-cookies --ca-certificate --certificate --private-key "
    "-e --execute -l --level -A --accept -R --reject -D --domains -X --exclude-directories "
    "-i --input-file -B --base --limit-rate -Q --quota --referer")
URL_COMMANDS: dict[str, frozenset[str]] = {
    "curl": frozenset(_CURL_VALUES.split()),
    "wget": frozenset(_WGET_VALUES.split()),
    "http": frozenset("-a --auth -A --auth-type --verify --cert --cert-key -o --output "
                      "--session --session-read-only -p --print".split()),
    "https": frozenset("-a --auth -A --auth-type --verify --cert --cert-key -o --output "
                       "--session --session-read-only -p --print".split()),
    "xh": frozenset("-a --auth -A --auth-type --verify --cert --cert-key -o --output "
                    "--session -p --print".split()),
}
# Options whose value is a URL.
URL_VALUE_OPTIONS = frozenset({"--url"})
# Options that send the request elsewhere: the value is a host the request reaches (a
# proxy: `curl -x evil.example https://github.com`), or it cannot be read from the line (a
# config or URL file, `--connect-to`, wget's `-e https_proxy=...`): a host that matches
# every deny or ask rule on domains.
URL_VIA_OPTIONS: dict[str, frozenset[str]] = {
    "curl": frozenset("-x --proxy --preproxy --doh-url --socks4 --socks4a --socks5 "
                      "--socks5-hostname".split()),
}
URL_HIDDEN_OPTIONS: dict[str, frozenset[str]] = {
    "curl": frozenset("-K --config --connect-to --resolve".split()),
    "wget": frozenset("-i --input-file -e --execute --config -B --base".split()),
}
# Variables that send a URL command's request through a proxy (`https_proxy=... curl`).
PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy", "ftp_proxy"})
