"""``python -m support.llama_server [llama_cpp.server arguments]``: llama-cpp-python's own OpenAI-compatible
server, unchanged, except that models load without llama.cpp's repacked weight buffers on CPUs with AMX,
where they crash the first decode (llama.cpp issue 20824): the server's settings have no option for
``use_extra_bufts``, so the default model parameters are patched for this process, as
:func:`rubricforge.llm.local_model.load_llama` does for one load."""

from __future__ import annotations

import llama_cpp.llama_cpp as native
from llama_cpp.server.__main__ import main

from rubricforge.llm.local_model import repack_weights


def _without_repack_on_amx() -> None:
    defaults, repack = native.llama_model_default_params, repack_weights(None)

    def params():
        p = defaults()
        p.use_extra_bufts = repack
        return p

    native.llama_model_default_params = params


if __name__ == "__main__":
    _without_repack_on_amx()
    main()
