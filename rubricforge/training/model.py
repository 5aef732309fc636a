"""The policy's tokenizer: loaded offline-friendly, its chat template checked for tool calling.

TRL parses tool calls only for chat templates it knows (Qwen2.5 / Qwen3, Llama 3.1+, GLM-4-MoE, gpt-oss,
...; Gemma 3 not). ``train.chat_template`` replaces the model's template with a known one (``qwen2.5``,
``qwen3``) or a ``.jinja`` file, for a model fine-tuned on that format.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from rubricforge.errors import UserError
from rubricforge.extras import install_hint, needs

TEMPLATE_FIX = ("use a model whose chat template TRL can parse (Qwen2.5, Qwen3, Llama 3.1), set "
                "train.chat_template=qwen2.5 (or qwen3, or a .jinja file), or set the tokenizer's response_template")
KNOWN_TEMPLATES = {"qwen2.5": "qwen2_5_chat_template", "qwen3": "qwen3_chat_template"}
EMBEDDED_POLICY = "qwen2.5-coder-0.5b-instruct-q4"  # the packaged GGUF `train from-gguf` converts by default


def load_tokenizer(model: str, chat_template: str | None = None, tools: bool = True) -> Any:
    """The tokenizer of ``model`` (a folder or a Hub name in the local cache), with ``chat_template`` applied;
    with ``tools``, a UserError unless TRL can render and parse its tool calls."""
    with needs("train"):
        from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the tokenizer of model '{model}' ({str(exc).splitlines()[0][:160]})",
                        "pass a local model folder (save_pretrained) or a Hub name already in the local cache") from None
    if chat_template:
        tokenizer.chat_template = _template(chat_template)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tools:
        ensure_tool_calling(tokenizer, model)
    return tokenizer


def _template(name: str) -> str:
    if name in KNOWN_TEMPLATES:
        with needs("train"):
            from trl import chat_template_utils

        return getattr(chat_template_utils, KNOWN_TEMPLATES[name])
    path = Path(name)
    if not path.is_file():
        raise UserError(f"chat template '{name}' is neither a known template nor a file",
                        f"use one of {', '.join(KNOWN_TEMPLATES)} or a path to a .jinja file")
    return path.read_text(encoding="utf-8")


def ensure_tool_calling(tokenizer: Any, model: str) -> None:
    """Raise a UserError naming the fix unless TRL can render and parse tool calls with this chat template."""
    with needs("train"):
        from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise UserError(f"the chat template of model '{model}' cannot render tool calls", TEMPLATE_FIX)
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(tokenizer)
        except ValueError:
            raise UserError(f"TRL cannot parse tool calls out of the chat template of model '{model}'",
                            TEMPLATE_FIX) from None


def gguf_to_transformers(gguf: str | Path, out: str | Path) -> Path:
    """A GGUF model (e.g. the embedded Qwen2.5-Coder-0.5B Q4) as a trainable transformers folder: transformers
    de-quantizes the weights on load (``gguf_file=``, needs the ``gguf`` package: ``pip install
    'rubricforge[gguf]'``), then the folder is saved once as fp32 safetensors with the GGUF's tokenizer and chat
    template. Already converted (``config.json`` present): returned as is."""
    gguf, out = Path(gguf), Path(out)
    if (out / "config.json").is_file():
        return out
    if importlib.util.find_spec("gguf") is None:
        raise UserError("reading a GGUF file into transformers needs the 'gguf' package", install_hint("gguf"))
    with needs("train"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # the tensors are de-quantized already; only this marker would refuse to save (nn.Module's attribute typing
    # knows tensors and modules only)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def greedy_reply(model: Any, messages: list[dict[str, Any]], max_new_tokens: int, *, tokenizer: Any,
                 tools: list[Any] | None = None) -> str:
    """The policy's greedy answer to ``messages`` (chat template with the ``tools`` schemas if any, no gradient),
    decoded; the model is left in training mode, as a trainer's callback finds it."""
    with needs("train"):
        import torch

    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True).to(model.device)
    model.eval()
    try:
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
    finally:
        model.train()
    return str(tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True))
