"""An HF chat template (Jinja) for SMI, for inference stacks that only take templates.

For trusted input only: a text template can't tell a payload's literal `<|sys|>` from the
structural token (seed 003; transformers #29279), so untrusted payloads go through the
compiler. On trusted input its text is `render.render_text(convert.from_messages(messages,
tools, smi_ctrl))` exactly, so `apply_chat_template(…, tokenize=True)` gives the compiler's ids
(tests/smi/test_compiler.py checks that over many conversations). Tool-call `arguments` must be
objects here (a template can't parse a JSON string; the converter does).

What the model writes is inside `{% generation %}` markers: its blocks and its `<|eot|>`, not
the `"\\n"` after that `<|eot|>` (the runtime supplies it), exactly where the compiler's
`assistant_mask` is 1; so `apply_chat_template(…, return_assistant_tokens_mask=True,
return_dict=True, tokenize=True)` gives the compiler's mask (tests/smi/test_template.py). A
model transmission's `<|eot|>` is written when the next message (or the end) shows the
transmission is over, so it has a span of its own. While the model speaks, no CAPS block is
pending (it went out with the runtime's first transmission), so none is written there.
"""

from __future__ import annotations

__all__ = ["CHAT_TEMPLATE", "install_template"]

CHAT_TEMPLATE = r"""
{%- set R = {'system': 1, 'developer': 2, 'user': 4, 'tool': 5} -%}
{%- set T = {'system': 'sys', 'developer': 'dev', 'user': 'usr', 'tool': 'obs'} -%}
{%- macro json(v) -%}{{- v | tojson(separators=(',', ':')) -}}{%- endmacro -%}
{%- macro block(tag, payload) -%}{{- '<|' ~ tag ~ '|>\n' ~ payload ~ '\n' -}}{%- endmacro -%}
{%- macro text(c) -%}
{%- if c is string -%}{{- c -}}
{%- elif c is iterable and c is not mapping -%}
{%- for p in c -%}
{%- if p.type == 'text' -%}{{- p.text -}}
{%- else -%}{{- raise_exception('the SMI template takes text parts only; use the compiler') -}}
{%- endif -%}
{%- endfor -%}
{%- elif c is not none -%}{{- raise_exception('message content is text or a list of parts') -}}
{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(side='', last=-1, caps='', first=true) -%}
{%- if tools is defined and tools -%}
{%- set tl = namespace(items=[]) -%}
{%- for t in tools -%}
{%- set f = t.function if t.function is defined else t -%}
{%- set params = f.parameters if f.parameters is defined else {'type': 'object'} -%}
{%- if f.description is defined -%}
{%- set item = {'name': f.name, 'description': f.description, 'parameters': params} -%}
{%- else -%}
{%- set item = {'name': f.name, 'parameters': params} -%}
{%- endif -%}
{%- set tl.items = tl.items + [item] -%}
{%- endfor -%}
{%- set ns.caps = block('caps', json({'tools': tl.items})) -%}
{%- endif -%}
{%- set has_ctrl = smi_ctrl is defined and smi_ctrl is not none -%}
{%- if has_ctrl or ns.caps -%}
{%- if not messages or messages[0].role == 'assistant' -%}
{%- if has_ctrl -%}{{- block('ctrl', json(smi_ctrl)) -}}{%- endif -%}
{{- ns.caps -}}{{- '<|eot|>\n' -}}
{%- set ns.caps = '' -%}{%- set ns.first = false -%}
{%- elif has_ctrl -%}{{- block('ctrl', json(smi_ctrl)) -}}
{%- endif -%}
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'assistant' -%}
{%- if ns.side == 'model' -%}
{%- generation -%}{{- '<|eot|>' -}}{%- endgeneration -%}{{- '\n' -}}
{%- elif ns.side -%}{{- ns.caps -}}{{- '<|eot|>\n' -}}{%- set ns.caps = '' -%}
{%- endif -%}
{%- generation -%}
{%- if m.reasoning_content -%}{{- block('think', text(m.reasoning_content)) -}}{%- endif -%}
{%- if m.content -%}{{- block('out', text(m.content)) -}}{%- endif -%}
{%- for c in m.tool_calls or [] -%}
{%- set f = c.function if c.function is defined else c -%}
{%- set args = f.arguments if f.arguments is defined else {} -%}
{%- if args is string -%}
{{- raise_exception('tool call arguments must be objects here') -}}
{%- endif -%}
{{- block('act', json({'id': c.id, 'type': 'tool', 'name': f.name, 'arguments': args})) -}}
{%- endfor -%}
{%- endgeneration -%}
{%- set ns.side = 'model' -%}{%- set ns.first = false -%}
{%- elif m.role in R -%}
{%- set rank = R[m.role] -%}
{%- if ns.side == 'model' -%}
{%- generation -%}{{- '<|eot|>' -}}{%- endgeneration -%}{{- '\n' -}}{%- set ns.first = false -%}
{%- elif ns.side == 'runtime' and ns.last > rank -%}
{{- ns.caps -}}{{- '<|eot|>\n' -}}{%- set ns.caps = '' -%}{%- set ns.first = false -%}
{%- endif -%}
{%- if ns.caps and rank > 3 -%}{{- ns.caps -}}{%- set ns.caps = '' -%}{%- endif -%}
{%- if m.role == 'tool' -%}
{%- set c = m.content -%}
{%- if c is not none and c is not string -%}
{%- set tp = namespace(s='') -%}
{%- for p in c -%}{%- set tp.s = tp.s ~ (p.text if p.text is defined else '') -%}{%- endfor -%}
{%- set c = tp.s -%}
{%- endif -%}
{{- block('obs', json({'caused_by': m.tool_call_id, 'ok': true, 'content': c})) -}}
{%- else -%}
{{- block(T[m.role], text(m.content)) -}}
{%- endif -%}
{%- set ns.side = 'runtime' -%}{%- set ns.last = rank -%}
{%- else -%}
{{- raise_exception('unknown role: ' ~ m.role) -}}
{%- endif -%}
{%- endfor -%}
{%- if ns.side == 'model' -%}
{%- generation -%}{{- '<|eot|>' -}}{%- endgeneration -%}{{- '\n' -}}
{%- elif ns.side -%}{{- ns.caps -}}{{- '<|eot|>\n' -}}
{%- endif -%}
""".strip()


def install_template(tokenizer: object) -> None:
    """Set the SMI template as the tokenizer's chat template (saved with it)."""
    tokenizer.chat_template = CHAT_TEMPLATE  # type: ignore[attr-defined]
