"""Every error the package raises on purpose is a CaDError (the CLI's exit 2 / 1, never 70)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import cad_outlines
from cad_outlines.errors import CaDError


def _product_modules():
    for info in pkgutil.walk_packages(cad_outlines.__path__, "cad_outlines."):
        if ".bench" in info.name or info.name.endswith(("__main__", "engines.vllm", "_vllm_processor", "_vllm_sessions", "vllm_engine")):
            continue  # bench is not product; the vLLM modules need vllm (checked below by source)
        yield importlib.import_module(info.name)


def test_every_public_error_class_is_a_cad_error():
    found = {}
    for module in _product_modules():
        for name, obj in vars(module).items():
            # Warnings and interrupts (a signal turned into KeyboardInterrupt) are not errors.
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and not issubclass(obj, (Warning, KeyboardInterrupt)) and obj.__module__ == module.__name__):
                found[f"{module.__name__}.{name}"] = obj
    assert len(found) >= 15, sorted(found)
    strays = sorted(name for name, cls in found.items() if not issubclass(cls, CaDError))
    assert strays == []
    # an interrupt must pass every `except Exception` on its way to the exit status
    from cad_outlines.files import Terminated

    assert not issubclass(Terminated, Exception)
    # the builtin bases callers may catch stay where they were
    from cad_outlines.decoding.generator import ContextLengthError, UnsupportedModelError
    from cad_outlines.decoding.prompts import PromptError
    from cad_outlines.decoding.sampler import OptionError
    from cad_outlines.training.sft import SFTError
    from cad_outlines.tools.text import ReplyError

    assert all(issubclass(c, ValueError) for c in (ContextLengthError, PromptError, OptionError, SFTError, ReplyError))
    assert issubclass(UnsupportedModelError, TypeError)


def test_every_error_class_lives_in_the_errors_module():
    """Product modules (the vLLM engine included, read as source) define no error class of
    their own: each is in cad_outlines.errors, a CaDError with an exit status."""
    import ast
    from pathlib import Path

    from cad_outlines import errors

    root = Path(cad_outlines.__file__).parent
    defined_elsewhere = [
        f"{path.relative_to(root)}:{node.name}"
        for path in [*root.rglob("*.py"), *(root.parent / "adapters").glob("*.py")]
        if "bench" not in path.parts and path.name != "errors.py"
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Error")]
    assert defined_elsewhere == []
    classes = [obj for obj in vars(errors).values() if inspect.isclass(obj) and issubclass(obj, BaseException)]
    assert len(classes) >= 25 and all(issubclass(c, CaDError) for c in classes)
    assert {c.exit_status for c in classes} == {errors.EXIT_MODEL, errors.EXIT_USAGE, errors.EXIT_INTERNAL}
    assert errors.ModelOutputError.exit_status == errors.EXIT_MODEL
    assert errors.InputError.exit_status == errors.EXIT_USAGE
    from cad_outlines.decoding.sampler import OptionError  # the old homes still name them
    from cad_outlines.tools.text import ReplyError

    assert OptionError is errors.OptionError and ReplyError is errors.ReplyError
    assert issubclass(errors.EngineSetupError, RuntimeError)


def test_bad_generator_options_fail_when_built_with_the_option_named(tiny_model):
    import pytest

    from cad_outlines.decoding.generator import CaDGenerator
    from cad_outlines.decoding.prompts import PromptError
    from cad_outlines.errors import InputError

    model = tiny_model("tiny-qwen")
    with pytest.raises(InputError, match="mode"):
        CaDGenerator(model, "a\n", mode="loose")  # was accepted, then failed after the decode
    with pytest.raises(InputError, match="granularity"):
        CaDGenerator(model, "a\n", granularity="chars")
    with pytest.raises(InputError, match="not valid Unicode.*character 2"):
        CaDGenerator(model, "ab\ud800c\n")  # a lone surrogate: was the tokenizer's TypeError
    gen = CaDGenerator(model, "a\n", max_new_tokens=4)
    for empty in ("", "   \n", [{"role": "user", "content": " "}]):
        with pytest.raises(PromptError, match="empty"):
            gen.run(empty)
    with pytest.raises(PromptError, match="is an assistant message"):
        gen.run([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])


def test_a_seed_out_of_range_is_an_option_error():
    import pytest

    from cad_outlines.decoding.sampler import OptionError, SamplingOptions

    with pytest.raises(OptionError, match="seed"):
        SamplingOptions(seed=10**23)  # was torch's overflow at run time
    with pytest.raises(OptionError, match="seed"):
        SamplingOptions(seed=-1)
    assert SamplingOptions(seed=2**63 - 1).seed == 2**63 - 1
