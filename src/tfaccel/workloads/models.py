"""Benchmark architectures built from Keras layers (random weights, nothing downloaded)."""

from __future__ import annotations

from typing import Any

# 3840x2160 (4K) padded to a multiple of the detector's stride 32.
UHD = (2176, 3840)


def yolo_style(
    input_hw: tuple[int, int] = UHD,
    width: int = 32,
    depth: int = 1,
    classes: int = 80,
    reg_max: int = 16,
) -> Any:
    """A YOLOv8s-sized detector: CSP (C2f) backbone, SPPF, FPN/PAN neck, 3 heads.

    width=32, depth=1 is the 's' size (about 11 M parameters).
    """
    import keras
    from keras import layers as L

    def conv(x: Any, c: int, k: int = 3, s: int = 1) -> Any:
        x = L.Conv2D(c, k, s, padding="same", use_bias=False)(x)
        x = L.BatchNormalization()(x)
        return L.Activation("silu")(x)

    def c2f(x: Any, c: int, n: int, shortcut: bool = True) -> Any:
        y = conv(x, c, 1)
        a, b = L.Lambda(lambda t: keras.ops.split(t, 2, axis=-1))(y)
        outs = [a, b]
        for _ in range(n):
            z = conv(conv(outs[-1], c // 2), c // 2)
            outs.append(L.Add()([outs[-1], z]) if shortcut else z)
        return conv(L.Concatenate()(outs), c, 1)

    def sppf(x: Any, c: int) -> Any:
        x = conv(x, c // 2, 1)
        p1 = L.MaxPooling2D(5, 1, padding="same")(x)
        p2 = L.MaxPooling2D(5, 1, padding="same")(p1)
        p3 = L.MaxPooling2D(5, 1, padding="same")(p2)
        return conv(L.Concatenate()([x, p1, p2, p3]), c, 1)

    w = width
    inp = keras.Input((*input_hw, 3), name="image")
    x = conv(inp, w, 3, 2)
    x = conv(x, 2 * w, 3, 2)
    x = c2f(x, 2 * w, depth)
    x = conv(x, 4 * w, 3, 2)
    p3 = c2f(x, 4 * w, 2 * depth)
    x = conv(p3, 8 * w, 3, 2)
    p4 = c2f(x, 8 * w, 2 * depth)
    x = conv(p4, 16 * w, 3, 2)
    p5 = sppf(c2f(x, 16 * w, depth), 16 * w)
    u = L.Concatenate()([L.UpSampling2D()(p5), p4])
    n4 = c2f(u, 8 * w, depth, shortcut=False)
    u = L.Concatenate()([L.UpSampling2D()(n4), p3])
    n3 = c2f(u, 4 * w, depth, shortcut=False)
    d = L.Concatenate()([conv(n3, 4 * w, 3, 2), n4])
    n4b = c2f(d, 8 * w, depth, shortcut=False)
    d = L.Concatenate()([conv(n4b, 8 * w, 3, 2), p5])
    n5 = c2f(d, 16 * w, depth, shortcut=False)
    heads = []
    for feat in (n3, n4b, n5):
        box = L.Conv2D(4 * reg_max, 1)(conv(conv(feat, 4 * w), 4 * w))
        cls = L.Conv2D(classes, 1)(conv(conv(feat, 4 * w), 4 * w))
        heads.append(L.Reshape((-1, 4 * reg_max + classes))(L.Concatenate()([box, cls])))
    out = L.Concatenate(axis=1, name="detections")(heads)
    return keras.Model(inp, out, name="yolo_style")


def conv3d_flops(batch: int, dhw: tuple[int, int, int], cin: int, cout: int, k: int = 3) -> float:
    """Multiply-adds x 2 of a 'same' Conv3D."""
    d, h, w = dhw
    return 2.0 * batch * d * h * w * cout * (k**3) * cin
