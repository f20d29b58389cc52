"""Translation: Transformer (encoder-decoder, "big" shapes) and a GNMT-style LSTM seq2seq."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tracekit.workloads.base import Task


def _tokens(gen, batch_size: int, seq: int, vocab: int, device):
    return torch.randint(1, vocab, (batch_size, seq), generator=gen, device=device)


def _seq2seq_batch(s: dict, batch_size: int, device):
    def make_batch(gen):
        src = _tokens(gen, batch_size, s["seq"], s["vocab"], device)
        tgt = _tokens(gen, batch_size, s["seq"] + 1, s["vocab"], device)
        return src, tgt[:, :-1], tgt[:, 1:]  # source, decoder input, decoder target (shifted)

    return make_batch


class Transformer(nn.Module):
    """Post-norm encoder-decoder Transformer with shared source/target/output embeddings and
    sinusoidal positions (Vaswani et al.; the MLPerf reference's "big" configuration)."""

    def __init__(self, s: dict):
        super().__init__()
        d = s["d_model"]
        self.embed = nn.Embedding(s["vocab"], d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.core = nn.Transformer(d, s["heads"], s["layers"], s["layers"], s["ffn"], dropout=0.1,
                                   batch_first=True)
        pos = torch.arange(s["seq"] + 1, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
        pe = torch.zeros(s["seq"] + 1, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe, persistent=False)
        self.scale = math.sqrt(d)

    def _emb(self, tokens):
        return F.dropout(self.embed(tokens) * self.scale + self.pe[: tokens.shape[1]], 0.1, self.training)

    def forward(self, src, tgt_in):
        n = tgt_in.shape[1]
        causal = torch.triu(torch.full((n, n), float("-inf"), device=src.device), 1)
        h = self.core(self._emb(src), self._emb(tgt_in), tgt_mask=causal, tgt_is_causal=True)
        return h @ self.embed.weight.t()


def build_transformer(s: dict, batch_size: int, device) -> Task:
    def loss(m, batch):
        src, tgt_in, tgt_out = batch
        logits = m(src, tgt_in)
        return F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), label_smoothing=0.1)

    return Task(model=Transformer(s), make_batch=_seq2seq_batch(s, batch_size, device), loss=loss,
                optimizer=lambda p: torch.optim.Adam(p, lr=1e-4, betas=(0.9, 0.98), eps=1e-9))


class GNMT(nn.Module):
    """GNMT as in the MLPerf reference: a 4-layer encoder (bidirectional first layer, residual
    connections from the third layer), a 4-layer decoder whose first layer's outputs query a
    normalized Bahdanau attention over the encoder, the context fed to every later layer, and a
    linear classifier over the vocabulary. Teacher forcing: the decoder runs the whole sequence."""

    def __init__(self, s: dict):
        super().__init__()
        h, v, n = s["hidden"], s["vocab"], s["layers"]
        self.src_embed = nn.Embedding(v, h)
        self.tgt_embed = nn.Embedding(v, h)
        self.enc_bi = nn.LSTM(h, h, batch_first=True, bidirectional=True)
        self.enc = nn.ModuleList([nn.LSTM(2 * h if i == 0 else h, h, batch_first=True) for i in range(n - 1)])
        self.dec0 = nn.LSTM(h, h, batch_first=True)
        self.dec = nn.ModuleList([nn.LSTM(2 * h, h, batch_first=True) for _ in range(n - 1)])
        self.att_q = nn.Linear(h, h, bias=False)
        self.att_k = nn.Linear(h, h, bias=False)
        self.att_v = nn.Parameter(torch.randn(h) / math.sqrt(h))
        self.att_g = nn.Parameter(torch.tensor(1.0 / math.sqrt(h)))
        self.att_b = nn.Parameter(torch.zeros(h))
        self.classifier = nn.Linear(h, v)
        self.dropout = nn.Dropout(0.2)

    def forward(self, src, tgt_in):
        x, _ = self.enc_bi(self.dropout(self.src_embed(src)))
        for i, lstm in enumerate(self.enc):
            y, _ = lstm(self.dropout(x))
            x = y + x if i >= 1 else y
        enc = x  # [B, S, H]
        q, _ = self.dec0(self.dropout(self.tgt_embed(tgt_in)))  # [B, T, H]
        # Normalized Bahdanau attention: score = g * v/|v| . tanh(Wq q + Wk k + b)
        v = self.att_g * self.att_v / self.att_v.norm()
        e = torch.tanh(self.att_q(q)[:, :, None, :] + self.att_k(enc)[:, None, :, :] + self.att_b)
        ctx = torch.softmax(e @ v, -1) @ enc  # [B, T, H]
        x = q
        for i, lstm in enumerate(self.dec):
            y, _ = lstm(self.dropout(torch.cat([x, ctx], -1)))
            x = y + x if i >= 1 else y
        return self.classifier(self.dropout(x))


def build_gnmt(s: dict, batch_size: int, device) -> Task:
    def loss(m, batch):
        src, tgt_in, tgt_out = batch
        logits = m(src, tgt_in)
        return F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), label_smoothing=0.1)

    return Task(model=GNMT(s), make_batch=_seq2seq_batch(s, batch_size, device), loss=loss,
                optimizer=lambda p: torch.optim.Adam(p, lr=2e-3))
