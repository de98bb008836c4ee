"""Real PyTorch training for measuring cellsched's estimator and reconfiguration cost on a GPU.

  python3 train.py gpt|bert LAYERS HIDDEN HEADS SEQ VOCAB BATCH ITERS
  python3 train.py cnn MODEL BATCH PRECISION ITERS
      MODEL: a torchvision model (resnet50, wide_resnet50_2, resnet18); PRECISION: fp32 | tf32 | bf16

Transformers: Hugging Face GPT-2 / BERT (masked LM) built from config (random init, no downloads), bf16
autocast, AdamW. CNNs: SGD with momentum, 224x224 random images, 1000 classes, cudnn.benchmark.
Every iteration prints `cellsched-iter <seconds>` (CUDA-synchronised), which `cellsched profile run`
reads. The transformer loop is ../shared/data/h100/train.py, the CNN loop ../shared/data/h100/train_cnn.py.

Elastic jobs (docs/GUIDE.md, "Elastic jobs"): when CELLSCHED_CKPT_DIR is set,
- on SIGUSR1, SIGUSR2 or the signal named by CELLSCHED_DL_ELASTIC, the iteration in flight finishes, the
  model and optimizer state are written to $CELLSCHED_CKPT_DIR/state.pt (temporary name, fsync, rename),
  `cellsched-save <seconds> <bytes>` is printed (signal to the file on disk) and the process exits with
  $CELLSCHED_RECONF_EXIT (75);
- on a start with CELLSCHED_RESTART > 0 and a checkpoint there, the state is loaded,
  `cellsched-load <seconds>` is printed, and after the first iteration `cellsched-restart <seconds>`:
  process start to the end of that iteration.
"""
import time

T0 = time.perf_counter()
import os
import signal
import sys

import torch

kind = sys.argv[1]
torch.manual_seed(0)
if kind == "cnn":
    import torchvision

    name, batch, prec, iters = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, name)(num_classes=1000).cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    lossf = torch.nn.CrossEntropyLoss()
    amp = prec == "bf16"

    def loss_of():
        return lossf(model(x), y)
else:
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    layers, hidden, heads, seq, vocab, batch, iters = map(int, sys.argv[2:9])
    if kind == "gpt":
        model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, n_positions=seq, vocab_size=vocab))
    else:
        model = BertForMaskedLM(BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                                           intermediate_size=4 * hidden, max_position_embeddings=seq, vocab_size=vocab))
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, vocab, (batch, seq), device="cuda")
    amp = True

    def loss_of():
        return model(input_ids=x, labels=x).loss

ckpt_dir = os.environ.get("CELLSCHED_CKPT_DIR", "")
ckpt = os.path.join(ckpt_dir, "state.pt") if ckpt_dir else ""
signalled = []
if ckpt:
    sigs = {signal.SIGUSR1, signal.SIGUSR2}
    extra = os.environ.get("CELLSCHED_DL_ELASTIC", "").upper()
    extra = extra if extra.startswith("SIG") else "SIG" + extra
    if extra not in ("SIG", "SIGKILL", "SIGSTOP") and hasattr(signal, extra):
        sigs.add(getattr(signal, extra))
    for s in sigs:
        signal.signal(s, lambda *_: signalled.append(time.perf_counter()))

restart = int(os.environ.get("CELLSCHED_RESTART", "0") or 0)
resumed = False
if ckpt and restart > 0 and os.path.exists(ckpt):
    t = time.perf_counter()
    state = torch.load(ckpt, map_location="cuda")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    del state
    torch.cuda.synchronize()
    print(f"cellsched-load {time.perf_counter() - t:.3f}", flush=True)
    resumed = True

for i in range(iters):
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        loss = loss_of()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(f"cellsched-iter {time.perf_counter() - t:.6f}", flush=True)
    if resumed and i == 0:
        print(f"cellsched-restart {time.perf_counter() - T0:.3f}", flush=True)
    if signalled:
        tmp = ckpt + ".tmp"
        with open(tmp, "wb") as f:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, ckpt)
        print(f"cellsched-save {time.perf_counter() - signalled[0]:.3f} {os.path.getsize(ckpt)}", flush=True)
        sys.exit(int(os.environ.get("CELLSCHED_RECONF_EXIT", "75")))
