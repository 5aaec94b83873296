"""`smllm store migrate TARGET`: move a project's instances and history to another store.

The config that supplies the machines (the project's, or `--config`) names its store in
`[state]`. migrate copies every instance row and history record of that store into TARGET in
one transaction, then points the config's `[state]` at TARGET (tomlkit: comments and layout
kept). All or nothing:

- an id or ref TARGET already holds refuses the copy, and nothing is written;
- the source is read in one snapshot and compared again just before TARGET commits: a fire
  that changed it meanwhile refuses the copy (stop the agents and run it again);
- the config is edited only after TARGET committed; then the moved rows are deleted from the
  source, in one transaction and only if it still holds exactly them (`--keep` leaves them
  there). A failure at that last step loses nothing: the config already names TARGET.

TARGET is a `postgresql://` URL, `env:VAR` (the config says `url-env = "VAR"`, so no password
lands in it), or a folder for an SQLite store (relative to the working directory).
"""

from __future__ import annotations

import os

from ..errors import RefTaken, StoreConflict, StoreError
from ..machine.model import StoreSpec
from .common import Exit, config_option, emit_json, read_toml_for_edit, write_atomically

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from argparse import Namespace

    from ..store.base import StoreDump

__all__ = ["store"]


def store(args: Namespace) -> int:
    if args.action == "migrate":
        return migrate(args)
    raise Exit(2, f"unknown store action {args.action}")  # pragma: no cover - argparse's


def target_spec(target: str, namespace: str | None) -> StoreSpec:
    if target.startswith(("postgresql://", "postgres://")):
        return StoreSpec("url", target, namespace or "default")
    if target.startswith("env:"):
        var = target[len("env:") :]
        if not var:
            raise Exit(2, "env: needs a variable name, as in env:SMLLM_DB")
        return StoreSpec("url-env", var, namespace or "default")
    if "://" in target:
        raise Exit(2, f"{target.split('://')[0]}:// is not a store; give a postgresql:// URL")
    if namespace is not None:
        raise Exit(2, "--namespace goes with a PostgreSQL target")
    return StoreSpec("dir", os.path.abspath(target), "default")


def describe(spec: StoreSpec) -> str:
    """A store as the user reads it: never a URL's password."""
    if spec.kind == "dir":
        from ..machine.configs.config import shown_path

        return shown_path(spec.value)
    from ..store.postgres import describe_url

    where = spec.value if spec.kind == "url" else os.environ.get(spec.value, "")
    via = f" (from ${spec.value})" if spec.kind == "url-env" else ""
    return f"postgresql://{describe_url(where)}{via}, namespace {spec.namespace}"


def migrate(args: Namespace) -> int:
    from ..api.app import App
    from ..api.stores import open_store
    from ..machine.configs.config import read_config, shown_path

    configs = App(config=config_option(args)).configs_here()
    if not configs:
        from ..errors import NoConfig

        raise NoConfig()
    config = configs[-1]  # the project's own, or --config: the one whose [state] moves
    read = read_config(config)
    if not read.ok:
        first = next(f for f in read.findings if f.level == "error")
        raise Exit(2, f"{shown_path(config)} has errors ({first.message}); smllm validate")
    source_spec = read.store
    target = target_spec(args.target, args.namespace)
    if _same(source_spec, target):
        raise Exit(2, f"{shown_path(config)} already keeps its instances there")

    # the config's new text first: a config that can't be edited stops the move before a copy
    text = _with_state(config, target)
    source = open_store(source_spec)
    destination = open_store(target)
    try:
        dump = source.dump()
        try:
            destination.load(dump, lambda: source.dump() == dump)
        except RefTaken as exc:
            raise Exit(
                1,
                f"{describe(target)} already holds {exc.machine} {exc.ref}; nothing was copied",
            ) from None
        except StoreConflict:
            raise Exit(
                1,
                "the store changed while it was copied (an agent fired meanwhile); nothing was "
                "copied: stop the agents and run smllm store migrate again",
            ) from None
    finally:
        source.close()
        destination.close()

    write_atomically(config, text.encode("utf-8"))
    if target.kind == "url" and _has_password(target.value):
        import sys

        sys.stderr.write(
            f"note: {shown_path(config)} now holds the URL's password; env:VAR keeps it out "
            "of the file (url-env)\n"
        )
    kept = args.keep or not dump.instances
    if not kept:
        source = open_store(source_spec)
        try:
            kept = not source.discard(dump)
        finally:
            source.close()
    moved = _counts(dump)
    if args.json:
        emit_json(
            {
                "config": config,
                "from": describe(source_spec),
                "to": describe(target),
                "instances": len(dump.instances),
                "history": len(dump.history),
                "sourceKept": kept,
            }
        )
    else:
        print(f"moved {moved} from {describe(source_spec)} to {describe(target)}")
        print(f"{shown_path(config)} now keeps its instances there")
        if kept and dump.instances:
            print(f"the rows moved are still in {describe(source_spec)} too")
    return 0


def _has_password(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        return bool(urlsplit(url).password)
    except ValueError:
        return False


def _same(a: StoreSpec, b: StoreSpec) -> bool:
    if a.kind == "dir" or b.kind == "dir":
        return a.kind == b.kind and os.path.realpath(a.value) == os.path.realpath(b.value)
    from ..api.stores import store_url

    try:
        return (store_url(a), a.namespace) == (store_url(b), b.namespace)
    except StoreError:  # an unset url-env: open_store says so, at use
        return False


def _counts(dump: StoreDump) -> str:
    n, h = len(dump.instances), len(dump.history)
    return f"{n} instance{'' if n == 1 else 's'} and {h} history record{'' if h == 1 else 's'}"


def _with_state(config: str, target: StoreSpec) -> str:
    """The config's text with `[state]` naming TARGET, everything else kept."""
    import tomlkit

    doc, bom = read_toml_for_edit(config)
    state = doc.get("state")
    if state is None:
        state = tomlkit.table()
        doc["state"] = state
    for key in ("dir", "url", "url-env", "namespace"):
        if key in state:
            del state[key]
    if target.kind == "dir":
        state["dir"] = os.path.relpath(target.value, os.path.dirname(config))
    else:
        state[target.kind] = target.value
        state["namespace"] = target.namespace
    return bom + tomlkit.dumps(doc)
