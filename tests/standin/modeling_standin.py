"""A remote-code model written the transformers-4 way, for tests that must not reach the hub.

It calls what the published remote code of gte (``NewModel``) and nomic-bert calls on ``PreTrainedModel``:
``self.get_extended_attention_mask(attention_mask, input_shape)`` for its additive mask (causal when the config
says ``is_decoder``) and ``self.get_head_mask(head_mask, num_hidden_layers)``, helpers transformers 5 removed.

Switches in its config choose how attention is computed, like the families it stands in for:
``attention="sdpa"`` calls ``F.scaled_dot_product_attention`` with that additive mask and passes the config's
``attention_dropout`` as ``dropout_p`` in eval mode too, as nomic-bert does; ``attention="softmax"`` is eager,
with an optional ALiBi-like additive bias (gte's NewModel, jina), through ``nn.functional.softmax`` or, with
``softmax="torch"``, ``torch.softmax`` (jina-v3); ``attention="auto"`` picks the eager or the SDPA attention class
by ``config._attn_implementation``, as gte's ``NewLayer`` picks ``NewAttention`` or ``NewSdpaAttention``.
``rotary`` adds rotary embeddings from a non-persistent ``inv_freq`` buffer, which ``_init_weights``
does not fill. ``unpad_inputs`` packs the valid tokens of all sequences into one row with a
block-diagonal mask; ``sequence_layout="packed"`` does the same under a name no loader knows.
``extra_softmax`` makes a second (batch, heads, queries, keys) softmax per layer.

Two more classes: ``StandInSdpaModel`` declares SDPA support (a revision whose default attention is SDPA), and
``StandInOwnLoaderModel`` brings its own ``from_pretrained``, which reads ``torch_dtype`` (not ``dtype``) and loads
the state dict by exact names with ``strict=False``, as nomic-bert's does.
"""

import logging
import math
import os

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

logger = logging.getLogger(__name__)


class StandInConfig(PretrainedConfig):
    model_type = "posfair_standin"

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=512,
        attention="softmax",
        rotary=False,
        alibi=False,
        unpad_inputs=False,
        sequence_layout="padded",
        extra_softmax=False,
        softmax="functional",
        attention_dropout=0.0,
        pad_token_id=0,
        **kwargs,
    ):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.attention = attention
        self.rotary = rotary
        self.alibi = alibi
        self.unpad_inputs = unpad_inputs
        self.sequence_layout = sequence_layout
        self.extra_softmax = extra_softmax
        self.softmax = softmax
        self.attention_dropout = attention_dropout


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, positions):
        freqs = positions[:, None, :, None].float() * self.inv_freq  # [B, 1, L, D/2]
        cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        first, second = x[..., ::2], x[..., 1::2]
        return torch.stack([first * cos - second * sin, first * sin + second * cos], dim=-1).flatten(-2)


class EagerAttention(nn.Module):
    """Scores, bias, one softmax over the keys, the head mask, then ``probs @ v`` (gte's ``NewAttention``)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.head_dim = config.hidden_size // config.num_attention_heads

    def forward(self, q, k, v, bias, head_mask):
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
        if self.config.softmax == "torch":
            probs = torch.softmax(scores, -1)
        else:
            probs = nn.functional.softmax(scores, dim=-1)
        if self.config.extra_softmax:
            probs = 0.5 * (probs + nn.functional.softmax(scores * 0.5, dim=-1))
        if head_mask is not None:
            probs = probs * head_mask
        return probs @ v


class SdpaAttention(EagerAttention):
    """The same weights through ``F.scaled_dot_product_attention`` (gte's ``NewSdpaAttention``, nomic-bert)."""

    def forward(self, q, k, v, bias, head_mask):
        dropout = self.config.attention_dropout  # passed in eval mode too, as nomic-bert passes attn_pdrop
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout)


ATTENTION_CLASSES = {"eager": EagerAttention, "sdpa": SdpaAttention}


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm1 = nn.LayerNorm(config.hidden_size)
        self.mlp = nn.Sequential(
            nn.Linear(config.hidden_size, config.intermediate_size),
            nn.GELU(),
            nn.Linear(config.intermediate_size, config.hidden_size),
        )
        self.norm2 = nn.LayerNorm(config.hidden_size)
        self.rotary = Rotary(self.head_dim) if config.rotary else None
        if config.alibi:
            slopes = torch.tensor([2.0 ** (-(h + 1)) for h in range(self.heads)])
            self.register_buffer("slopes", slopes, persistent=False)
        chosen = {"sdpa": "sdpa", "softmax": "eager"}.get(config.attention) or config._attn_implementation
        self.attention = ATTENTION_CLASSES[chosen](config)

    def forward(self, hidden, bias, positions, head_mask=None):
        b, length, _ = hidden.shape
        q, k, v = self.qkv(hidden).view(b, length, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rotary is not None:
            q, k = self.rotary(q, positions), self.rotary(k, positions)
        if self.config.alibi:
            distance = (positions[:, None, :, None] - positions[:, None, None, :]).abs().float()
            bias = bias - self.slopes[None, :, None, None] * distance
        context = self.attention(q, k, v, bias, head_mask)
        context = context.transpose(1, 2).reshape(b, length, -1)
        hidden = self.norm1(hidden + self.out(context))
        return self.norm2(hidden + self.mlp(hidden))


class StandInPreTrainedModel(PreTrainedModel):
    config_class = StandInConfig
    base_model_prefix = "standin"

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.02)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()


class StandInModel(StandInPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.positions = None if config.rotary else nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.num_hidden_layers)])
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, head_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        valid = attention_mask.bool()
        positions = (valid.long().cumsum(dim=1) - 1).clamp(min=0)
        hidden = self.embeddings(input_ids)
        if self.positions is not None:
            hidden = hidden + self.positions(positions)
        head_mask = self.get_head_mask(head_mask, self.config.num_hidden_layers)
        packed = self.config.unpad_inputs or self.config.sequence_layout == "packed"
        if packed:  # one row of every valid token, sequences kept apart by a block-diagonal mask
            owner = torch.arange(input_ids.shape[0], device=input_ids.device)[:, None].expand_as(input_ids)[valid]
            hidden, positions = hidden[valid][None], positions[valid][None]
            allowed = owner[:, None] == owner[None, :]
            bias = torch.zeros(allowed.shape, dtype=hidden.dtype).masked_fill(~allowed, torch.finfo(hidden.dtype).min)
            bias = bias[None, None]
        else:  # the transformers-4 way: the PreTrainedModel helper turns the 0/1 mask into an additive bias
            bias = self.get_extended_attention_mask(attention_mask, input_ids.shape)
        for block, layer_head_mask in zip(self.blocks, head_mask, strict=True):
            hidden = block(hidden, bias, positions, layer_head_mask)
        if packed:
            unpacked = hidden.new_zeros(*input_ids.shape, hidden.shape[-1])
            unpacked[valid] = hidden[0]
            hidden = unpacked
        return BaseModelOutput(last_hidden_state=hidden)


class StandInSdpaModel(StandInModel):
    """A revision that declares SDPA support: transformers then picks ``_attn_implementation="sdpa"``."""

    _supports_sdpa = True


class StandInOwnLoaderModel(StandInModel):
    """Loads itself, as nomic-bert does: reads ``torch_dtype`` only, and ``load_state_dict(strict=False)``."""

    @classmethod
    def from_pretrained(cls, model_name, *args, config=None, **kwargs):
        from safetensors.torch import load_file

        if config is None:
            config = cls.config_class.from_pretrained(model_name)
        dtype = kwargs.pop("torch_dtype", None)
        model = cls(config)
        if dtype is not None:
            model = model.to(dtype=dtype)
        state = load_file(os.path.join(model_name, "model.safetensors"))
        logger.warning(model.load_state_dict(state, strict=False))
        return model
