"""A tiny Qwen2-architecture causal LM and tokenizer built locally (no download), for CPU training tests.

The tokenizer is a byte-level BPE trained in a second on the agent's system prompt and a few corpus
passages (byte-level, so every text round-trips exactly, as TRL's multi-turn tokenisation requires), with
Qwen2.5's special tokens and Qwen2.5's chat template — taken from TRL's copy, the exact string TRL matches
to recognise tool calling. The model has 2 layers of width 64: random weights, a few hundred KB.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]


def build_tiny_qwen(out: Path, texts: list[str], vocab_size: int = 1500, seed: int = 0) -> Path:
    """Save a tiny Qwen2 model and its tokenizer to ``out`` (loadable with ``from_pretrained``)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    from rubricforge.agent.prompt import agent_system_prompt

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator([agent_system_prompt(), qwen2_5_chat_template, *texts], trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>"], padding_side="left")
    tok.add_tokens(ADDED)
    tok.chat_template = qwen2_5_chat_template
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
