"""Param schemas: reading `meta.events.E.params` (EVT-1 … EVT-4) into `ParamSpec`s.

jsonschema is imported only here and only when a machine file is parsed or a JSON param is
checked: the hook path never loads it.
"""

from __future__ import annotations

from ...recordclass import Record
from ..model import ParamSpec
from .inline import inline_refs, resolve_ref

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "as_json",
    "env_name",
    "json_param_errors",
    "read_params",
    "ref_param_spec",
    "schema_message",
]

#: machine-format.md §2.4: a schema using only these keys (with no type, or type string) is a
#: string param shown as "one of"/"pattern" and checked by smllm itself.
_PLAIN_STRING_KEYS = frozenset({"description", "enum", "pattern"})
_PARAMS_KEYS = ("type", "properties", "required", "$defs")

# Keywords of the draft 2020-12 vocabularies (core, applicator, unevaluated, validation,
# meta-data, format-annotation, content): anything else is a typo such as `enums` (EVT-1).
_KEYWORDS = frozenset(
    [
        "$schema",
        "$id",
        "$ref",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
        "$defs",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "prefixItems",
        "items",
        "contains",
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "type",
        "const",
        "enum",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    ]
)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "items",
        "contains",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)


class Problem(Record):
    """A finding inside a params object, at its value or, for an unknown key, at the key."""

    path: tuple[str | int, ...]  # inside the params object
    rule: str
    message: str
    at_key: bool = False


_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset("0123456789")
_ENV_CHARS = _UPPER | _DIGITS | {"_"}


def env_name(param: str) -> str:
    """machine-format.md §4: `issueId` → `ISSUE_ID`, `prURL` → `PR_URL`."""
    # an `_` before an upper-case letter that follows a lower-case letter or digit, or that
    # starts a word after an acronym (`prURLText` → PR_URL_TEXT); then every character but
    # A-Z, 0-9 and _ becomes _ (str methods, not `re`: a command's environment is built on the
    # hook path)
    out = []
    for i, c in enumerate(param):
        if i and c in _UPPER:
            before = param[i - 1]
            after = param[i + 1 : i + 2]
            if before in _LOWER or before in _DIGITS or (before in _UPPER and after in _LOWER):
                out.append("_")
        out.append(c)
    return "".join(c if c in _ENV_CHARS else "_" for c in "".join(out).upper())


#: the deepest param schema: jsonschema recurses per level, and no real param nests this far
MAX_SCHEMA_DEPTH = 32

# applicators that apply to the same value, not to a part of it: a `$ref` that reaches itself
# through only these never reaches a value, and recurses for ever when a param is checked
_IN_PLACE_ONE = frozenset({"not", "if", "then", "else"})
_IN_PLACE_LISTS = frozenset({"allOf", "anyOf", "oneOf"})


def _walk_keywords(
    schema: Any, path: tuple[str | int, ...], out: list[Problem], depth: int = 0
) -> bool:
    """EVT-1/EVT-2 of one schema's keywords; True when it nests past MAX_SCHEMA_DEPTH (then
    jsonschema, which recurses per level, must not read it)."""
    if isinstance(schema, bool) or not isinstance(schema, dict):
        return False
    if depth > MAX_SCHEMA_DEPTH:
        out.append(
            Problem(path, "EVT-1", f"the schema nests more than {MAX_SCHEMA_DEPTH} levels deep")
        )
        return True
    deep = False
    for key, value in schema.items():
        sub = (*path, key)
        if key not in _KEYWORDS:
            out.append(Problem(sub, "EVT-1", f"{key} is not a JSON Schema 2020-12 keyword", True))
        elif key in ("$ref", "$dynamicRef"):
            # a $dynamicRef with a JSON Pointer is a $ref (2020-12 §8.2.3.2); one to an anchor
            # would resolve outside params' $defs, or nowhere
            if not isinstance(value, str) or not value.startswith("#/$defs/"):
                out.append(
                    Problem(sub, "EVT-1", f"{key} {value} must point inside params (#/$defs/…)")
                )
        elif key == "$id":
            # an $id moves the base every `#/$defs/…` under it resolves against: away from
            # params, where those refs point at nothing
            out.append(
                Problem(sub, "EVT-1", "$id can't be used in params: $refs resolve in params")
            )
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, item in value.items():
                deep = _walk_keywords(item, (*sub, name), out, depth + 1) or deep
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for index, item in enumerate(value):
                deep = _walk_keywords(item, (*sub, index), out, depth + 1) or deep
        elif key in _SCHEMA_ONE:
            deep = _walk_keywords(value, sub, out, depth + 1) or deep
        elif key in ("pattern",) and isinstance(value, str):
            _check_pattern(value, sub, out)
    for key in ("patternProperties",):
        if isinstance(schema.get(key), dict):
            for pat in schema[key]:
                _check_pattern(pat, (*path, key, pat), out)
    return deep


def _refs(schema: Any, path: tuple[str | int, ...], in_place: bool) -> list[tuple[Any, ...]]:
    """(where, ref, in place) of each `$ref` in `schema`; in place while only in-place
    applicators lead to it from the top of `schema`."""
    if not isinstance(schema, dict):
        return []
    out: list[tuple[Any, ...]] = []
    for key, value in schema.items():
        sub = (*path, key)
        if (
            key in ("$ref", "$dynamicRef")
            and isinstance(value, str)
            and value.startswith("#/$defs/")
        ):
            out.append((sub, value, in_place))
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, item in value.items():
                same = in_place and key == "dependentSchemas"
                out.extend(_refs(item, (*sub, name), same))
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for index, item in enumerate(value):
                same = in_place and key in _IN_PLACE_LISTS
                out.extend(_refs(item, (*sub, index), same))
        elif key in _SCHEMA_ONE:
            out.extend(_refs(value, sub, in_place and key in _IN_PLACE_ONE))
    return out


def _ref_problems(params: dict[str, Any]) -> list[Problem]:
    """EVT-1 for each `$ref` that points at nothing, and for each loop of `$ref`s that never
    reaches a value (`a: {$ref: "#/$defs/a"}`): both fail every time the param is checked.
    Every one is reported, each at the `$ref` that is wrong or closes the loop."""
    out: list[Problem] = []
    found = _refs(params, (), False)
    targets = {ref: resolve_ref(params, ref) for _, ref, _ in found}
    for where, ref, _ in found:
        if targets[ref] is None:
            out.append(Problem(where, "EVT-1", f"{where[-1]} {ref} points at nothing in $defs"))
    # the refs each target reaches in place: a cycle among them never reaches a value (a ref
    # to nothing has no target, so it is no step of a loop)
    reach: dict[str, list[tuple[Any, str]]] = {}
    places: dict[str, tuple[str | int, ...]] = {}
    for ref, target in targets.items():
        if target is None:
            continue
        places[ref] = target[0]
        inner = _refs(target[1], (), True)
        reach[ref] = [(w, r) for w, r, same in inner if same and targets.get(r) is not None]
    # depth-first, each ref expanded once: every step back onto the trail closes one loop
    done: set[str] = set()
    for start in reach:
        if start in done:
            continue
        trail = [start]  # the refs being followed
        stack = [iter(reach[start])]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                done.add(trail.pop())
                continue
            where, nxt = step
            if nxt in trail:
                loop = [*trail[trail.index(nxt) :], nxt]
                names = " → ".join(r.removeprefix("#/$defs/") for r in loop)
                message = f"$ref loops without reaching a value: {names}"
                out.append(Problem((*places[trail[-1]], *where), "EVT-1", message))
            elif nxt not in done:
                trail.append(nxt)
                stack.append(iter(reach[nxt]))
    return out


def _check_pattern(pattern: str, path: tuple[str | int, ...], out: list[Problem]) -> None:
    from ..regex import PatternError, compile_pattern

    try:
        compile_pattern(pattern)
    except PatternError as exc:
        out.append(Problem(path, "EVT-2", f"bad pattern {pattern}: {exc.reason}"))


def _is_plain_string(schema: dict[str, Any]) -> tuple[bool, bool]:
    """(is a string param, uses only description/enum/pattern)."""
    type_ = schema.get("type")
    keys = set(schema) - {"type"}
    enum = schema.get("enum")
    plain = keys <= _PLAIN_STRING_KEYS and (
        enum is None or (isinstance(enum, list) and all(isinstance(v, str) for v in enum))
    )
    if type_ == "string":
        return True, plain
    if type_ is None and plain:
        return True, True
    return False, False


def _spec(
    name: str, schema: dict[str, Any], required: bool, params: dict[str, Any] | None = None
) -> tuple[ParamSpec, list[str]]:
    """The param's spec, and the `$ref`s its shown schema keeps (recursive ones, EVT-13)."""
    is_string, plain = _is_plain_string(schema)
    enum = schema.get("enum")
    rest = {k: v for k, v in schema.items() if k not in ("description",)}
    shown = None
    stuck: list[str] = []
    if not is_string and set(rest) - {"type"}:
        import json

        if params is not None:  # the agent reads the schema with every $ref it can inlined
            rest, stuck = inline_refs(rest, params)
            if stuck:
                rest["$defs"] = params.get("$defs")
        shown = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    desc = schema.get("description")
    spec = ParamSpec(
        name=name,
        required=required,
        is_string=is_string,
        enum=tuple(enum) if is_string and isinstance(enum, list) else None,
        pattern=schema.get("pattern") if isinstance(schema.get("pattern"), str) else None,
        description=desc if isinstance(desc, str) else None,
        schema=schema,
        schema_shown=shown,
        plain=plain,
    )
    return spec, stuck


def ref_param_spec(
    name: str, pattern: str | None, description: str | None, required: bool
) -> ParamSpec:
    schema: dict[str, Any] = {"type": "string"}
    if pattern is not None:
        schema["pattern"] = pattern
    return ParamSpec(name, required, True, None, pattern, description, schema, None, True)


def read_params(params: Any) -> tuple[tuple[ParamSpec, ...], dict[str, Any] | None, list[Problem]]:
    """Read one `params` object: its specs in declaration order, its $defs, its problems."""
    problems: list[Problem] = []
    if not isinstance(params, dict):
        return (), None, [Problem((), "EVT-1", "params must be a mapping (a JSON Schema object)")]
    for key in params:
        if key not in _PARAMS_KEYS:
            problems.append(
                Problem(
                    (key,),
                    "EVT-1",
                    f"params can't have {key} (allowed: type, "
                    "properties, required, $defs); the params object is always closed",
                    at_key=True,
                )
            )
    if params.get("type", "object") != "object":
        problems.append(Problem(("type",), "EVT-1", "params type must be object"))
    props = params.get("properties") or {}
    required = params.get("required") or []
    defs = params.get("$defs")
    # every problem of the object at once: a part that is wrong is left out of the checks
    # that would only repeat it
    props_ok = isinstance(props, dict)
    if not props_ok:
        problems.append(Problem(("properties",), "EVT-1", "properties must be a mapping"))
        props = {}
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append(Problem(("required",), "EVT-1", "required must be a list of param names"))
        required = []
    defs_ok = defs is None or isinstance(defs, dict)
    if not defs_ok:
        problems.append(Problem(("$defs",), "EVT-1", "$defs must be a mapping"))
        defs = None
    for index, name in enumerate(required):
        if props_ok and name not in props:
            problems.append(
                Problem(("required", index), "EVT-3", f"required param {name} isn't declared")
            )
    from ..regex import pattern_matches
    from .schema import NAME_PATTERNS

    specs: list[ParamSpec] = []
    schemas: list[tuple[tuple[str | int, ...], Any]] = []  # for the metaschema check
    recursive: list[Problem] = []  # EVT-13, unless a $ref is wrong (EVT-1 says so)
    for name, schema in props.items():
        path: tuple[str | int, ...] = ("properties", name)
        if not pattern_matches(NAME_PATTERNS["param"], name):
            problems.append(
                Problem(path, "FMT-7", f"param name {name} must match {NAME_PATTERNS['param']}")
            )
            continue
        if not isinstance(schema, dict):
            if not isinstance(schema, bool):
                problems.append(Problem(path, "EVT-1", f"the schema of {name} must be a mapping"))
                continue
            schema = {} if schema else {"not": {}}
        if not _walk_keywords(schema, path, problems):
            schemas.append((path, props[name]))
        spec, stuck = _spec(name, schema, name in required, params if defs_ok else None)
        specs.append(spec)
        if stuck:
            names = ", ".join(ref.removeprefix("#/$defs/") for ref in stuck)
            message = (
                f"the schema of {name} refers to itself through $defs ({names}), so it can't be "
                "inlined: the agent reads it with its $defs"
            )
            recursive.append(Problem(path, "EVT-13", message))
    for name, schema in (defs or {}).items():
        if not _walk_keywords(schema, ("$defs", name), problems):
            schemas.append((("$defs", name), schema))
    if defs_ok:  # a $defs that isn't a mapping has no place to point into
        wrong = _ref_problems(params)
        problems.extend(wrong or recursive)
    # jsonschema's checks, but not where ours already found the node wrong (a `$ref: 5`)
    taken = {p.path for p in problems}
    for path, schema in schemas:
        problems.extend(p for p in _metaschema_problems(schema, path) if p.path not in taken)
    return tuple(specs), defs, problems


def _metaschema_problems(schema: Any, at: tuple[str | int, ...]) -> list[Problem]:
    """The draft 2020-12 metaschema's findings on one property or $defs schema at `at`."""
    from jsonschema import Draft202012Validator

    out: list[Problem] = []
    for error in Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema):
        path = (*at, *error.absolute_path)
        unknown = _unknown_types(error.instance) if path[-1:] == ("type",) else []
        if unknown:  # jsonschema says "'strng' is not valid under any of the given schemas"
            message = f"type {', '.join(unknown)} doesn't exist (types: {', '.join(_JSON_TYPES)})"
        else:
            message = f"not a valid JSON Schema: {schema_message(error)}"
        out.append(Problem(path, "EVT-1", message))
    return out


_JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _unknown_types(value: Any) -> list[str]:
    """The words of a `type` (a string, or a list of strings) that name no JSON type."""
    words = value if isinstance(value, list) else [value]
    if not all(isinstance(w, str) for w in words):
        return []
    return [w for w in words if w not in _JSON_TYPES]


def as_json(value: Any) -> str:
    """`value` as JSON text (`null`, `true`, `"x"`), as the author wrote it; repr for what JSON
    can't write."""
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def schema_message(error: Any) -> str:
    """jsonschema's message for `error` with its values written as JSON: it writes them with
    Python's repr (`None is not one of [None, True]`, `'x' is not of type 'integer'`).

    The values a message can quote are the instance, the keyword's value, their items and
    keys, and a few parts of the schema; each one's repr is replaced in a single pass, longest
    first, so a replacement is never read again."""
    if error.validator is None:  # the schema `false`: jsonschema's one message without keyword
        return f"false schema does not allow {as_json(error.instance)}"
    found: list[Any] = [error.instance, error.validator_value]
    for value in (error.instance, error.validator_value):
        if isinstance(value, list):
            found += value
        elif isinstance(value, dict):
            found += list(value)
            found += [v for item in value.values() if isinstance(item, list) for v in item]
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator in ("additionalProperties", "unevaluatedProperties"):
        found += list(schema.get("patternProperties") or ())  # "… do not match any of …"
    if error.validator == "items" and isinstance(error.instance, list):
        found.append(error.instance[len(schema.get("prefixItems") or ()) :])  # "… extra: […]"
    texts: dict[str, str] = {}
    for value in found:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            continue  # a finite number's repr is its JSON, and digits are in the prose too
        text = repr(value)
        if text != as_json(value):
            texts[text] = as_json(value)
    if not texts:
        return str(error.message)
    import re

    # None, True and False only as whole words; quoted and bracketed reprs delimit themselves
    pattern = "|".join(
        rf"\b{re.escape(t)}\b" if t[0].isalpha() else re.escape(t)
        for t in sorted(texts, key=len, reverse=True)
    )
    return re.sub(pattern, lambda m: texts[m.group()], str(error.message))


def _validator_for(schema: dict[str, Any]) -> Any:
    from jsonschema import Draft202012Validator, validators

    from ..regex import pattern_matches

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Any:
        if isinstance(instance, str) and not pattern_matches(patrn, instance):
            from jsonschema.exceptions import ValidationError

            yield ValidationError(f"{as_json(instance)} does not match {as_json(patrn)}")

    kind = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, {"pattern": pattern}
    )
    return kind(schema)


def json_param_errors(
    spec: ParamSpec, defs: dict[str, Any] | None, value: Any, limit: int = 10
) -> tuple[list[str], int]:
    """Sentences `At PATH: ERROR` for a value failing its schema, ordered by path, and how many
    more there were beyond `limit`; values in them are written as JSON."""
    schema = dict(spec.schema)
    if defs:
        schema["$defs"] = defs
    first: dict[tuple[Any, ...], str] = {}
    try:
        for error in _validator_for(schema).iter_errors(value):
            path = tuple(error.absolute_path)
            if path not in first:
                first[path] = schema_message(error)
    except Exception as exc:  # a reference jsonschema can't resolve, which the load missed
        from referencing.exceptions import Unresolvable

        if not isinstance(exc, Unresolvable) and not isinstance(exc.__cause__, Unresolvable):
            raise
        return [f"the schema can't check the value: {exc}; smllm validate tells more"], 0
    keys = sorted(
        first, key=lambda p: tuple((0, x, "") if isinstance(x, int) else (1, 0, x) for x in p)
    )
    out = []
    for path in keys[:limit]:
        where = (
            "the root"
            if not path
            else "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)
        )
        out.append(f"At {where}: {first[path]}")
    return out, max(0, len(keys) - limit)
