"""Commands that run another command (SPEC §18 "Shell commands"): the table the walker reads.

Each entry says how the wrapped command is found among the wrapper's words: which options
take a value (the next word, or attached: `-uroot`, `--user=root`), which take none, how
many operands come before the command (`timeout 5 cmd`), whether `NAME=value` words may come
first (`env A=1 cmd`), and how the command is given:
- `exec`: the remaining words are the command (`sudo rm x`);
- `line`: the remaining words, joined by spaces, are a command line (`eval`, `watch`);
- `shell`: a shell; with `-c` the next operand is a command line, else it runs a script;
- `xargs`: the remaining words are the command, with arguments read from its input;
- `find`: each `-exec`/`-execdir`/`-ok`/`-okdir` ... `;` or `+` is a command.
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
