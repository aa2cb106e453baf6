# float8 on the text classification script: as tuned, then without XLA's command buffers
cd /tmp/repo/.gpu-examples
export PYTHONPATH=/tmp/repo/src:/tmp/repo/experiments/2026-12-02-user-models/local_datasets:$PYTHONPATH
for flags in "" "--xla_gpu_enable_command_buffer="; do
  echo "== XLA_FLAGS='$flags'"
  s=$(date +%s)
  XLA_FLAGS="$flags" timeout 150 python3 -m tfaccel run --config f8.json -- python text_classification_with_transformer.py > /tmp/f8.log 2>&1
  echo "exit $? in $(( $(date +%s) - s )) s"
  grep -v "━" /tmp/f8.log | grep -i "tfaccel:\|error\|INTERNAL\|Epoch\|val_acc" | cut -c1-400 | tail -8
  tr '\r' '\n' < /tmp/f8.log | grep "val_accuracy" | tail -2 | cut -c1-300
done
