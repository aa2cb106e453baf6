"""Built-in workloads (random weights, real architectures, nothing downloaded)."""

from __future__ import annotations

from tfaccel.workloads import Workload


def resnet50() -> Workload:
    """Keras ResNet-50, 224x224x3 ImageNet-shaped, 1000 classes."""
    import keras

    model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
    return Workload("resnet50", model, sample_unit="images", label_classes=1000)


def bert_base(
    seq_len: int = 128,
    vocab: int = 30522,
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
    classes: int = 2,
) -> Workload:
    """A BERT-base-sized encoder (110 M parameters) built from Keras layers."""
    import keras
    from keras import layers as L

    tokens = keras.Input((seq_len,), dtype="int32", name="token_ids")
    x = L.Embedding(vocab, hidden, name="token_embedding")(tokens)
    pos = L.Embedding(512, hidden, name="position_embedding")(
        keras.ops.expand_dims(keras.ops.arange(seq_len), 0)
    )
    x = L.Add()([x, pos])
    x = L.LayerNormalization(epsilon=1e-12)(x)
    x = L.Dropout(0.1)(x)
    for i in range(layers):
        att = L.MultiHeadAttention(heads, hidden // heads, dropout=0.1, name=f"attention_{i}")(x, x)
        x = L.LayerNormalization(epsilon=1e-12)(L.Add()([x, L.Dropout(0.1)(att)]))
        h = L.Dense(ffn, activation="gelu")(x)
        h = L.Dense(hidden)(h)
        x = L.LayerNormalization(epsilon=1e-12)(L.Add()([x, L.Dropout(0.1)(h)]))
    cls = L.Dense(hidden, activation="tanh", name="pooler")(x[:, 0, :])
    out = L.Dense(classes, name="classifier")(cls)
    model = keras.Model(tokens, out, name="bert_base")
    return Workload(
        "bert",
        model,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        sample_unit="sequences",
        label_classes=classes,
    )


def tiny_cnn() -> Workload:
    """A small CNN on 32x32x3 inputs: the CPU-friendly example."""
    import keras
    from keras import layers as L

    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            L.Conv2D(32, 3, padding="same", activation="relu"),
            L.MaxPooling2D(),
            L.Conv2D(64, 3, padding="same", activation="relu"),
            L.MaxPooling2D(),
            L.Flatten(),
            L.Dense(128, activation="relu"),
            L.Dense(10),
        ],
        name="tiny_cnn",
    )
    return Workload(
        "tiny",
        model,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        sample_unit="images",
        label_classes=10,
    )


def bert_hub(
    seq_len: int = 128,
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
    classes: int = 2,
) -> Workload:
    """KerasHub's BERT architecture (BertTextClassifier), random weights, no download.

    The issue's BERT-base baseline (1,492 seq/s on an H200) was measured with this model.
    """
    import keras

    from tfaccel._deps import require

    keras_hub = require("keras_hub", "keras-hub", "KerasHub")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=ffn,
        max_sequence_length=seq_len,
    )
    model = keras_hub.models.BertTextClassifier(
        backbone=backbone, num_classes=classes, preprocessor=None
    )
    # Fix the sequence length so every input has a static shape.
    inputs = {
        "token_ids": keras.Input((seq_len,), dtype="int32", name="token_ids"),
        "segment_ids": keras.Input((seq_len,), dtype="int32", name="segment_ids"),
        "padding_mask": keras.Input((seq_len,), dtype="int32", name="padding_mask"),
    }
    fixed = keras.Model(inputs, model(inputs), name="bert_hub")
    return Workload(
        "bert_hub",
        fixed,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        sample_unit="sequences",
        label_classes=classes,
    )
