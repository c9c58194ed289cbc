"""Serves a GGUF model with llama.cpp's own server (the xllamacpp wheel) on
loopback, OpenAI-compatible, at temperature 0 so runs repeat.

usage: serve.py MODEL.gguf PORT ALIAS [N_CTX]
Prints "listening <address>" once the server is up; SIGTERM stops it.
"""

import os
import signal
import sys
import time

import xllamacpp as xlc


def main() -> None:
    model, port, alias = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    n_ctx = int(sys.argv[4]) if len(sys.argv) > 4 else 16384
    p = xlc.CommonParams()
    p.model.path = model
    p.model_alias = {alias}  # a set: a plain string becomes one alias per character
    p.n_ctx = n_ctx
    p.n_parallel = 1
    p.use_jinja = True  # the model's own chat template, with its tool markers
    p.ui = False
    p.hostnames = ["127.0.0.1"]
    p.port = port
    threads = int(os.environ.get("MAIA_MODEL_THREADS", "2"))
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = threads
    # Greedy decoding: the server's default sampling is temperature 0.8.
    p.sampling.temp = 0.0
    p.sampling.top_k = 1
    p.sampling.seed = 0
    server = xlc.Server(p)  # the HTTP server runs in a background thread
    print("listening", server.listening_address, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
