"""Write a tiny transformers checkpoint (Llama, random weights, nothing downloaded) to a directory,
for trying ``fxport convert DIR --task text-generation`` without a real model:

    python3 examples/tiny_checkpoint.py tiny-llama
    fxport convert tiny-llama --task text-generation --max-new-tokens 8 -o gen.onnx

The directory holds what ``save_pretrained()`` writes for any model: ``config.json``,
``generation_config.json`` and ``model.safetensors``.
"""

import sys

import torch


def write_checkpoint(directory: str, seed: int = 0) -> str:
    """A 2-layer Llama (vocabulary 64, width 32, grouped-query attention) saved to ``directory``."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # one line of output, not a "Writing model shards" bar

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def main(arguments: list[str]) -> None:
    if len(arguments) != 1:
        sys.exit("usage: python3 examples/tiny_checkpoint.py DIRECTORY")
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        sys.exit(f"examples/tiny_checkpoint.py needs transformers ({exc}); "
                 "pip install 'fxport[transformers]' (bash scripts/setup installs it)")
    print(f"wrote {write_checkpoint(arguments[0])}")


if __name__ == "__main__":
    main(sys.argv[1:])
