#!/usr/bin/python3
"""PyTorch blocks on the virtual T1: small real blocks defined in torch.nn
(an MLP with LayerNorm and GELU, RMSNorm + SwiGLU, causal multi-head
attention, nn.TransformerEncoderLayer), exported to ONNX with Debian's
python3-torch (1.13, opset 14), run on the chip with `tessera-vp run`, and
compared with PyTorch's own outputs (rtol 1e-3, atol 1e-5: float32 GEMMs
summed in another order).

    pytorch_blocks.py TESSERA_VP OUT_DIR

Exit status: 0 when every block agrees, 1 when one does not or a run
fails, 77 (skipped) when torch cannot be imported, with the reason."""
import os
import subprocess
import sys

try:
    import onnx.numpy_helper as nh
    import torch
    import torch.nn as nn
except ImportError as e:  # the test command installs python3-torch; say why not
    print(f"skipped: {e} (Debian's python3-torch and python3-onnx are needed)")
    sys.exit(77)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(64), nn.Linear(64, 128), nn.Linear(128, 64)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class RmsSwiglu(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(64))
        self.gate, self.up = nn.Linear(64, 128, bias=False), nn.Linear(64, 128, bias=False)
        self.down = nn.Linear(128, 64, bias=False)

    def forward(self, x):
        n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return x + self.down(nn.functional.silu(self.gate(n)) * self.up(n))


class CausalAttention(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        a = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        a = a.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf")).softmax(-1)
        return self.out((a @ v).transpose(1, 2).reshape(b, t, c))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    vp, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(1)
    blocks = [("mlp", Mlp()), ("rms_swiglu", RmsSwiglu()), ("causal_attention", CausalAttention()),
              ("transformer_encoder_layer", nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True))]
    status = 0
    for name, block in blocks:
        block.eval()
        x = torch.randn(2, 8, 64)
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        model = os.path.join(folder, "model.onnx")
        torch.onnx.export(block, (x,), model, opset_version=14, input_names=["x"], output_names=["y"])
        with torch.no_grad():
            y = block(x)
        with open(os.path.join(folder, "input_0.pb"), "wb") as f:
            f.write(nh.from_array(x.numpy(), "x").SerializeToString())
        with open(os.path.join(folder, "output_0.pb"), "wb") as f:
            f.write(nh.from_array(y.numpy(), "y").SerializeToString())
        run = subprocess.run([vp, "run", model, "--check", folder, "--atol", "1e-5"], capture_output=True, text=True,
                             timeout=300)
        ok = run.returncode == 0 and "agrees with the expected one" in run.stdout
        print(f"{name}: {'agrees with PyTorch' if ok else 'DIFFERS'}: {(run.stdout + run.stderr).strip()}")
        status |= not ok
    return status


if __name__ == "__main__":
    sys.exit(main())
