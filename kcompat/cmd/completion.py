"""`kcompat completion bash|zsh|fish`: a completion script made from the command line's own parser,
so every noun, verb, option and fixed choice completes and nothing drifts out of date.

    bash:  source <(kcompat completion bash)       (or save it in /etc/bash_completion.d/kcompat)
    zsh:   source <(kcompat completion zsh)        (bash's script through bashcompinit)
    fish:  kcompat completion fish > ~/.config/fish/completions/kcompat.fish
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

SHELLS = ("bash", "zsh", "fish")


def register(commands: Any) -> None:
    p = commands.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, fish)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tree = command_tree(args.command_parser)
    print({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](tree), end="")
    return 0


def command_tree(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], dict[str, Any]]:
    """path of words -> {"subs": [names], "options": [flags], "choices": {flag: [values]}}."""
    node: dict[str, Any] = {"subs": [], "options": [], "choices": {}}
    tree = {path: node}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                node["subs"].append(name)
                tree.update(command_tree(sub, (*path, name)))
        elif action.option_strings and action.help != argparse.SUPPRESS:
            node["options"].extend(action.option_strings)
            if action.choices:
                for flag in action.option_strings:
                    node["choices"][flag] = [str(c) for c in action.choices]
        elif not action.option_strings and action.choices:
            node["choices"][""] = [str(c) for c in action.choices]  # a positional with fixed values
    return tree


def bash(tree: dict[tuple[str, ...], dict[str, Any]]) -> str:
    subs_cases, word_cases, choice_cases = [], [], []
    for path, node in sorted(tree.items()):
        key = shlex.quote(" ".join(path))
        if node["subs"]:
            subs_cases.append(f"    {key}) echo {shlex.quote(' '.join(node['subs']))} ;;")
        words = node["subs"] + node["options"] + node["choices"].get("", [])
        word_cases.append(f"    {key}) words={shlex.quote(' '.join(words))} ;;")
        for flag, values in sorted(node["choices"].items()):
            if flag:
                choice_cases.append(
                    f"    {shlex.quote(' '.join(path) + ' ' + flag)}) words={shlex.quote(' '.join(values))} ;;"
                )
    return f"""# kcompat completion for bash (kcompat completion bash)
_kcompat_subs() {{
  case "$1" in
{chr(10).join(subs_cases)}
  esac
}}
_kcompat() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" path="" words="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    case " $(_kcompat_subs "$path") " in *" $w "*) path="${{path:+$path }}$w" ;; esac
  done
  case "$path $prev" in
{chr(10).join(choice_cases)}
    *)
      case "$path" in
{chr(10).join("  " + c for c in word_cases)}
      esac ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _kcompat kcompat
"""


def zsh(tree: dict[tuple[str, ...], dict[str, Any]]) -> str:
    return (
        "# kcompat completion for zsh (kcompat completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n"
        + bash(tree).split("\n", 1)[1]
    )


def fish(tree: dict[tuple[str, ...], dict[str, Any]]) -> str:
    lines = ["# kcompat completion for fish (kcompat completion fish)", "complete -c kcompat -f"]
    for path, node in sorted(tree.items()):
        if path:
            cond = "; and ".join(f"__fish_seen_subcommand_from {shlex.quote(w)}" for w in path)
        else:
            cond = "__fish_use_subcommand"
        if node["subs"]:
            not_yet = f"; and not __fish_seen_subcommand_from {' '.join(node['subs'])}" if path else ""
            lines.append(
                f"complete -c kcompat -n {shlex.quote(cond + not_yet)} -a {shlex.quote(' '.join(node['subs']))}"
            )
        for flag in node["options"]:
            opt = (
                f"-l {flag[2:]}"
                if flag.startswith("--")
                else f"-s {flag[1:]}"
                if len(flag) == 2
                else f"-o {flag[1:]}"
            )
            values = node["choices"].get(flag)
            extra = f" -x -a {shlex.quote(' '.join(values))}" if values else ""
            lines.append(f"complete -c kcompat -n {shlex.quote(cond)} {opt}{extra}")
        if node["choices"].get(""):
            lines.append(
                f"complete -c kcompat -n {shlex.quote(cond)} -a {shlex.quote(' '.join(node['choices']['']))}"
            )
    return "\n".join(lines) + "\n"
