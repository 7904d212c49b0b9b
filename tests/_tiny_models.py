"""Tiny models built offline for the runner and precompute tests (random weights, saved with
``save_pretrained`` and loaded back by the agents through ``from_pretrained``).

Each is built once per test session (memoized on the session's base temporary directory).
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import torch

from l2d_core.agents.generative import FEW_SHOT

WORDS = (
    "moby dick is an 1851 novel by american writer herman melville about the whale who wrote "
    "what when where which in of and to was for on as with city year first"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "-", ".", "?", ",", "(", ")"]


def bert_tokenizer():
    from transformers import BertTokenizerFast

    return BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB)})


@functools.cache
def tiny_bert_qa(root: str) -> Path:
    """BertForQuestionAnswering (hidden 32, 2 layers) + a word-level BERT tokenizer."""
    from transformers import BertConfig, BertForQuestionAnswering

    path = Path(root) / "tiny-bert-qa"
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    BertForQuestionAnswering(cfg).save_pretrained(path)
    bert_tokenizer().save_pretrained(path)
    return path


@functools.cache
def tiny_llama(root: str) -> Path:
    """LlamaForCausalLM (hidden 32, 2 layers) + a byte-level BPE tokenizer trained on the
    few-shot demonstrations (any text encodes; newlines survive a decode)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(root) / "tiny-llama"
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    texts = [f'Context: "{c}"\nQuestion: "{q}"\nOutput: "{a}"\n' for c, q, a in FEW_SHOT]
    bpe.train_from_iterator(texts * 4 + [" ".join(WORDS)] * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


class LogitsByToken(torch.nn.Module):
    """A stand-in QA model: start/end logits set per token id, so the best span is known. (A
    one-hot matmul rather than a lookup, so that the FLOP counter sees some work.)"""

    def __init__(self, start: dict[int, float], end: dict[int, float], n: int = len(VOCAB)):
        super().__init__()
        self.table = torch.zeros(n, 2)  # (V, 2): start, end logit of each token
        for k, v in start.items():
            self.table[k, 0] = v
        for k, v in end.items():
            self.table[k, 1] = v

    def forward(self, input_ids, **_):
        logits = torch.nn.functional.one_hot(input_ids, len(self.table)).float() @ self.table  # (B, T, 2)
        return type("Out", (), {"start_logits": logits[..., 0], "end_logits": logits[..., 1]})()


@contextlib.contextmanager
def one_thread():
    """Tiny models on one torch thread: on a shared 2-core machine two threads spin-wait for
    each other, and a tiny forward takes ~30 times longer."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)
