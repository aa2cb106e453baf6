"""Built-in workloads (random weights, real architectures, nothing downloaded)."""

from __future__ import annotations

from typing import Any

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
        hidden_out = L.Dense(ffn, activation="gelu")(x)
        hidden_out = L.Dense(hidden)(hidden_out)
        x = L.LayerNormalization(epsilon=1e-12)(L.Add()([x, L.Dropout(0.1)(hidden_out)]))
    cls = L.Dense(hidden, activation="tanh", name="pooler")(x[:, 0, :])
    out = L.Dense(classes, name="classifier")(cls)
    model = keras.Model(tokens, out, name="bert_base")
    return Workload(
        "bert",
        model,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=TEXT_CLASSIFIER_OPTIMIZER,
        sample_unit="sequences",
        label_classes=classes,
    )


# What KerasHub's tasks compile with when given no optimizer: Adam at 5e-5 for a text
# classifier, 2e-5 for a causal LM (fine-tuning rates). Plain "adam" (1e-3) makes these
# transformers' losses swing far above chance on synthetic labels. A config, not an
# instance: every model compiled gets its own optimizer.
TEXT_CLASSIFIER_OPTIMIZER = {"class_name": "Adam", "config": {"learning_rate": 5e-5}}
CAUSAL_LM_OPTIMIZER = {"class_name": "Adam", "config": {"learning_rate": 2e-5}}


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
    """KerasHub's BERT architecture (BertTextClassifier), random weights, no download."""
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
        optimizer=TEXT_CLASSIFIER_OPTIMIZER,
        sample_unit="sequences",
        label_classes=classes,
    )


def gpt2_causal_lm(
    vocab: int = 50257,
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
    max_len: int = 1024,
) -> Any:
    """KerasHub's GPT2CausalLM without a preprocessor (token ids in), random weights."""
    from tfaccel._deps import require

    keras_hub = require("keras_hub", "keras-hub", "KerasHub")
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=vocab,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=ffn,
        max_sequence_length=max_len,
    )
    return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)


def gpt2(
    seq_len: int = 128,
    vocab: int = 50257,
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    ffn: int = 3072,
) -> Workload:
    """KerasHub's GPT-2 124M (GPT2CausalLM), random weights: next-token training."""
    import keras

    causal_lm = gpt2_causal_lm(vocab, layers, hidden, heads, ffn, max(seq_len, 1024))
    inputs = {
        "token_ids": keras.Input((seq_len,), dtype="int32", name="token_ids"),
        "padding_mask": keras.Input((seq_len,), dtype="int32", name="padding_mask"),
    }
    fixed = keras.Model(inputs, causal_lm(inputs), name="gpt2")
    return Workload(
        "gpt2",
        fixed,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=CAUSAL_LM_OPTIMIZER,
        sample_unit="sequences",
        label_shape=(seq_len,),
        label_classes=vocab,
    )


def yolo(size: int = 640) -> Workload:
    """The YOLOv8s-sized detector of `tfaccel bench yolo`, trained at its usual 640x640.

    A dense binary cross-entropy on every anchor's box and class outputs stands in for
    YOLO's assignment-based loss; the network, not the loss, is where the time goes.
    """
    import keras

    from tfaccel.workloads.models import yolo_style

    model = yolo_style(input_hw=(size, size))
    return Workload(
        "yolo",
        model,
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        sample_unit="images",
        label_shape=tuple(int(dim) for dim in model.output.shape[1:]),
        label_dtype="float32",
    )


def conv3d(frames: int = 16, size: int = 112, classes: int = 400) -> Workload:
    """A C3D-style 3D convolution network on 16x112x112 video clips (Kinetics-shaped)."""
    import keras
    from keras import layers as L

    x = inp = keras.Input((frames, size, size, 3), name="clip")
    for i, (channels, convs) in enumerate([(64, 1), (128, 1), (256, 2), (512, 2), (512, 2)]):
        for _ in range(convs):
            x = L.Conv3D(channels, 3, padding="same", use_bias=False)(x)
            x = L.BatchNormalization()(x)
            x = L.Activation("relu")(x)
        x = L.MaxPooling3D((1, 2, 2) if i == 0 else 2, padding="same")(x)
    x = L.GlobalAveragePooling3D()(x)
    x = L.Dense(1024, activation="relu")(x)
    out = L.Dense(classes)(x)
    return Workload(
        "conv3d",
        keras.Model(inp, out, name="conv3d"),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        sample_unit="clips",
        label_classes=classes,
    )
