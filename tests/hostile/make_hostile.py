#!/usr/bin/env python3
"""Writes the hostile-file corpus: tests/hostile/files/<format>/<case>/ (malformed IDX, CIFAR-10,
CSV, safetensors, checkpoint and config files, plus one valid baseline per format) and
tests/hostile/cases.tsv, which run_hostile.sh reads: case, expected exit status, the tandem
command ({case}: the case directory, {work}: a scratch directory), and the '|'-separated texts the
one error line must contain (the file's name and the field). Rerun after changing a case:
python3 tests/hostile/make_hostile.py"""
import os
import shutil
import struct
import zlib

from formats import checkpoint, cifar_record, gz, idx, manifest, mlp_tensors, safetensors, \
    safetensors_header

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, "files")
U64_MAX = 2**64 - 1

EVAL_DATA = "eval --model mlp --weights {case}/model.safetensors --workers 0 --data "
EVAL_WEIGHTS = "eval --model mlp --data synthetic:4:3:8 --workers 0 --weights "
TRAIN = "train --model mlp --data synthetic:4:3:8 --max-steps 1 --workers 0 --out {work}/run "

cases = []  # (format/case, status, command, needles, {relative path: bytes})


def case(name, files, command, needles, status=2):
    cases.append((name, status, command, needles, files))


# --- IDX (MNIST layout, test split): t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte -------
IMG, LAB = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
images = idx([3, 2, 2], range(12))
labels = idx([3], [0, 9, 4])
IDX_CMD = EVAL_DATA + "mnist:{case}"
mnist_weights = safetensors(mlp_tensors(4, 10))


def idx_case(name, img=images, lab=labels, needles=(IMG, "offset"), img_name=IMG):
    case("idx/" + name, {img_name: img, LAB: lab}, IDX_CMD, list(needles))


case("idx/valid", {IMG: images, LAB: labels, "model.safetensors": mnist_weights}, IDX_CMD, [], 0)
for cut in (0, 2, 3, 4, 6, 8, 12, 15, 16, 20, 27):  # every header boundary and inside the data
    idx_case("images_cut_at_%d" % cut, img=images[:cut])
idx_case("labels_cut_at_6", lab=labels[:6], needles=(LAB, "offset"))
idx_case("labels_cut_at_9", lab=labels[:9], needles=(LAB, "offset"))
idx_case("wrong_magic", img=b"\x01\x02" + images[2:], needles=(IMG, "magic"))
idx_case("png_magic", img=b"\x89PNG\r\n\x1a\n" + images[8:], needles=(IMG, "magic"))
idx_case("float_element_type", img=images[:2] + b"\x0d" + images[3:], needles=(IMG, "element type"))
idx_case("rank_0", img=bytes([0, 0, 8, 0]), needles=(IMG, "rank"))
idx_case("rank_255", img=bytes([0, 0, 8, 255]) + bytes(64), needles=(IMG, "rank"))
idx_case("rank_1_images", img=idx([12], range(12)), needles=(IMG, "rank"))
idx_case("size_over_int32", img=idx([2**31, 2, 2], range(12)), needles=(IMG, "2147483648"))
idx_case("size_uint32_max", img=idx([2**32 - 1, 2, 2], range(12)), needles=(IMG, "4294967295"))
idx_case("sizes_overflow_64_bits", img=idx([2**31 - 1] * 3, range(12)), needles=(IMG, "offset"))
idx_case("header_claims_terabytes", img=idx([2**31 - 1, 28, 28], range(12)), needles=(IMG, "offset"))
idx_case("trailing_bytes", img=images + b"\0\0\0", needles=(IMG, "offset"))
idx_case("label_10", lab=idx([3], [0, 10, 4]), needles=(LAB, "label 10"))
idx_case("label_255", lab=idx([3], [0, 1, 255]), needles=(LAB, "label 255"))
idx_case("count_mismatch", lab=idx([2], [0, 1]), needles=(IMG, "3 images"))
idx_case("gzip_truncated", img=gz(images)[:20], img_name=IMG + ".gz", needles=(IMG + ".gz", "offset"))
broken = bytearray(gz(images))
broken[12] ^= 0xFF
idx_case("gzip_corrupt", img=bytes(broken), img_name=IMG + ".gz", needles=(IMG + ".gz", "offset"))
idx_case("gzip_trailing_garbage", img=gz(images) + b"junk", img_name=IMG + ".gz",
         needles=(IMG + ".gz", "offset"))
idx_case("gzip_of_bad_header", img=gz(idx([2**31 - 1, 28, 28], [])), img_name=IMG + ".gz",
         needles=(IMG + ".gz", "offset"))

# --- CIFAR-10 (test split): test_batch.bin, records of 1 label + 3072 pixel bytes ------------
CIFAR_CMD = EVAL_DATA + "cifar10:{case}"
CIF = "test_batch.bin"
two = cifar_record(3, 1) + cifar_record(7, 2)
for name, data, needles in [
        ("empty", b"", [CIF, "offset 0"]),
        ("cut_in_first_record", two[:3072], [CIF, "3072"]),
        ("cut_after_label", two[:1], [CIF, "size 1"]),
        ("cut_in_second_record", two[:3073 + 100], [CIF, "3173"]),
        ("one_byte_extra", two + b"\0", [CIF, "6147"]),
        ("label_10", cifar_record(10), [CIF, "label 10"]),
        ("label_255_in_second_record", cifar_record(1) + cifar_record(255), [CIF, "label 255"]),
        ("png_instead", b"\x89PNG\r\n\x1a\n" + bytes(100), [CIF, "size 108"])]:
    case("cifar/" + name, {CIF: data}, CIFAR_CMD, needles)
case("cifar/missing_batch", {"data_batch_1.bin": two}, CIFAR_CMD, [CIF, "does not exist"])

# --- CSV: features then an integer label ---------------------------------------------------
CSV_CMD = EVAL_DATA + "csv:{case}/data.csv"
good_csv = b"f1,f2,f3,label\n0.5,1,2,0\n3,4,5,1\n6,7,8,2\n"
case("csv/valid", {"data.csv": good_csv, "model.safetensors": safetensors(mlp_tensors(3, 3))},
     CSV_CMD, [], 0)
for name, text, needles in [
        ("empty", b"", ["data.csv:1", "empty"]),
        ("header_only", b"a,b,label\n", ["data.csv:1", "no data rows"]),
        ("nan", b"1,nan,0\n2,3,1\n", ["data.csv:1:3", "field 2 'nan'"]),
        ("minus_nan", b"1,2,0\n-nan,3,1\n", ["data.csv:2:1", "field 1 '-nan'"]),
        ("infinity", b"1,inf,0\n2,3,1\n", ["data.csv:1:3", "field 2 'inf'"]),
        ("beyond_float32", b"1,3.5e38,0\n2,3,1\n", ["data.csv:1:3", "float32 range"]),
        ("beyond_float64", b"1,1e400,0\n2,3,1\n", ["data.csv:1:3", "out of range"]),
        ("huge_exponent", b"1,2,0\n9" + b"9" * 400 + b",3,1\n", ["data.csv:2:1", "field 1"]),
        ("label_negative", b"1,2,0\n2,3,-1\n", ["data.csv:2:5", "field 3 '-1'"]),
        ("label_fraction", b"1,2,0.5\n2,3,1\n", ["data.csv:1:5", "field 3 '0.5'"]),
        ("label_2_pow_31", b"1,2,0\n2,3,2147483648\n", ["data.csv:2:5", "field 3"]),
        ("label_2_pow_31_minus_1", b"1,2,0\n2,3,2147483647\n", ["data.csv:2:5", "field 3"]),
        ("label_1e300", b"1,2,0\n2,3,1e300\n", ["data.csv:2:5", "field 3"]),
        ("ragged_row", b"1,2,0\n2,3,4,1\n", ["data.csv:2", "4 fields"]),
        ("short_row", b"1,2,0\n2,1\n", ["data.csv:2", "2 fields"]),
        ("empty_field", b"1,2,0\n2,,1\n", ["data.csv:2:3", "empty"]),
        ("binary_garbage", bytes(range(256)) * 4, ["data.csv:1", "column"]),
        ("nul_in_number", b"1,2,0\n1,2\x003,0\n", ["data.csv:2:3", "field 2"]),
        ("one_column", b"1\n2\n", ["data.csv:1", "column"])]:
    case("csv/" + name, {"data.csv": text}, CSV_CMD, needles)

# --- safetensors (tandem eval --weights): the mlp for 4 features and 3 classes --------------
ST = "model.safetensors"
ST_CMD = EVAL_WEIGHTS + "{case}/" + ST
good = safetensors(mlp_tensors(4, 3))
head_len = struct.unpack("<Q", good[:8])[0]
data_start = 8 + head_len
case("safetensors/valid", {ST: good}, ST_CMD, [], 0)
for cut in (0, 4, 7, 8, 9, 8 + head_len // 2, data_start - 1, data_start, data_start + 400,
            len(good) - 1):
    case("safetensors/cut_at_%d" % cut, {ST: good[:cut]}, ST_CMD, [ST, "field"])


def st_case(name, data, needles):
    case("safetensors/" + name, {ST: data}, ST_CMD, [ST] + needles)


def with_length(n, rest=good[8:]):
    return struct.pack("<Q", n) + rest


st_case("header_length_2_pow_32_plus_8", with_length(2**32 + 8), ['"header length"', "4294967304"])
st_case("header_length_u64_max", with_length(U64_MAX), ['"header length"', str(U64_MAX)])
st_case("header_length_3_gigabytes", with_length(3 * 10**9), ['"header length"', "3000000000"])
st_case("header_length_just_under_limit", with_length(99_999_999), ['"header length"', "99999999"])
st_case("header_length_zero", with_length(0), ['"header"', "JSON"])
st_case("header_not_json", with_length(head_len, b"\xff" * head_len + good[data_start:]),
        ['"header"', "JSON"])
st_case("header_is_array", safetensors_header([]).replace(b"{}", b"[]"), ['"header"', "object"])
st_case("header_nested_deeply", with_length(20000, b"[" * 10000 + b"]" * 10000),
        ['"header"', "deeper"])
st_case("tensor_nested_deeply",
        with_length(20008, b'{"a":' + b"[" * 10000 + b"]" * 10000 + b"}  "), ['"header"', "deeper"])


def entries_case(name, entries, data_bytes, needles, metadata=None):
    st_case(name, safetensors_header(entries, metadata) + bytes(data_bytes), needles)


entries_case("offsets_overlap", [("a", "F32", [2], 0, 8), ("b", "F32", [2], 4, 12)], 12,
             ['"data_offsets"', "overlaps"])
entries_case("offsets_past_end", [("a", "F32", [2], 0, 8), ("b", "F32", [2], 8, 16)], 12,
             ['"data_offsets"', "beyond"])
entries_case("offset_begin_after_end", [("a", "F32", [0], 8, 0)], 8, ['"data_offsets"', "after end"])
entries_case("offsets_overflow_64_bits", [("a", "F32", [2], U64_MAX - 3, 4)], 8,
             ['"data_offsets"', str(U64_MAX - 3)])
entries_case("offset_beyond_u64", [("a", "F32", [2], 0, 2**64)], 8, ['"data_offsets"', "integers"])
entries_case("offsets_leave_a_gap", [("a", "F32", [1], 0, 4), ("b", "F32", [1], 8, 12)], 12,
             ['"data_offsets"', "gap"])
entries_case("trailing_bytes", [("a", "F32", [1], 0, 4)], 12, ['"file size"', "trailing"])
entries_case("span_does_not_fit_shape", [("a", "F32", [2, 2], 0, 8)], 8, ['"data_offsets"', "needs 16"])
entries_case("shape_overflows_64_bits", [("a", "F32", [2**32, 2**32, 16], 0, 8)], 8,
             ['"shape"', "addressed"])
entries_case("shape_over_int64", [("a", "U8", [2**63], 0, 8)], 8, ['"shape"', "addressed"])
entries_case("shape_negative", [("a", "F32", [-2], 0, 8)], 8, ['"shape"', "-2"])
entries_case("shape_fraction", [("a", "F32", [1.5], 0, 8)], 8, ['"shape"', "1.5"])
entries_case("dtype_unknown", [("a", "F33", [2], 0, 8)], 8, ['"dtype"', "F33"])
entries_case("dtype_unsupported", [("a", "F16", [4], 0, 8)], 8, ['"dtype"', "F16"])
entries_case("metadata_not_strings", [("a", "F32", [2], 0, 8)], 8, ['"__metadata__"'],
             metadata={"k": [1, 2]})
dup = safetensors_header([("a", "F32", [1], 0, 4), ("b", "F32", [1], 4, 8)]).replace(b'"b"', b'"a"')
st_case("duplicate_name", dup + bytes(8), ['"name"', "duplicate"])
no_offsets = safetensors_header([("a", "F32", [1], 0, 4)]).replace(b'"data_offsets"', b'"data_offset_"')
st_case("missing_data_offsets", no_offsets + bytes(4), ['"data_offsets"', "missing"])
case("safetensors/wrong_tensor_names", {ST: safetensors([("fc9.weight", [1], [0.0])])}, ST_CMD,
     ["--weights", "fc9.weight"])

# --- checkpoints (tandem eval --weights DIR, tandem train --resume DIR) -----------------------
CK = "step-00000001"
CK_CMD = EVAL_WEIGHTS + "{case}/" + CK
ck = checkpoint(4, 3)
MAN = "manifest.json"


def ck_case(name, changes, needles, command=CK_CMD, drop=()):
    files = {CK + "/" + n: b for n, b in {**ck, **changes}.items() if n not in drop}
    case("checkpoint/" + name, files, command, [CK] + needles)


def ck_manifest(**entry_changes):
    """The manifest with model.safetensors's entry changed."""
    import json
    doc = json.loads(ck[MAN])
    doc["files"][0].update(entry_changes)
    return (json.dumps(doc, indent=2) + "\n").encode()


case("checkpoint/valid", {CK + "/" + n: b for n, b in ck.items()}, CK_CMD, [], 0)
ck_case("no_manifest", {}, [MAN, "incomplete"], drop=(MAN,))
for cut in (0, 1, len(ck[MAN]) // 2, len(ck[MAN]) - 3):
    ck_case("manifest_cut_at_%d" % cut, {MAN: ck[MAN][:cut]}, [MAN, "damaged"])
ck_case("manifest_is_array", {MAN: b"[]"}, [MAN, "not a tandem checkpoint"])
ck_case("manifest_wrong_format", {MAN: manifest({}, fmt="zip")}, [MAN, "not a tandem checkpoint"])
ck_case("manifest_version_99", {MAN: ck[MAN].replace(b'"version": 1', b'"version": 99')},
        ["version 99"])
ck_case("manifest_no_files", {MAN: ck[MAN].split(b'"files"')[0] + b'"files": 7}'}, [MAN, "files"])
ck_case("entry_without_crc", {MAN: ck[MAN].replace(b'"crc32"', b'"crc"', 1)}, [MAN, "malformed"])
ck_case("bytes_u64_max", {MAN: ck_manifest(bytes=U64_MAX)}, [MAN, '"bytes"', str(U64_MAX)])
ck_case("bytes_2_pow_40_plus_1", {MAN: ck_manifest(bytes=2**40 + 1)}, [MAN, '"bytes"'])
ck_case("bytes_negative", {MAN: ck_manifest(bytes=-1)}, [MAN, "malformed"])
ck_case("crc_over_32_bits", {MAN: ck_manifest(crc32=2**32 + 5)}, ["model.safetensors", "CRC-32"])
ck_case("name_dev_zero", {MAN: ck_manifest(name="/dev/zero")}, [MAN, '"name"', "/dev/zero"])
ck_case("name_escapes_directory", {MAN: ck_manifest(name="../../../../etc/passwd")},
        [MAN, '"name"', "etc/passwd"])
ck_case("name_listed_twice", {MAN: ck_manifest(name="state.json", bytes=len(ck["state.json"]),
                                               crc32=zlib.crc32(ck["state.json"]))},
        [MAN, '"name"', "twice"])
ck_case("model_missing", {}, ["model.safetensors", "missing"], drop=("model.safetensors",))
ck_case("model_truncated", {"model.safetensors": ck["model.safetensors"][:-10]},
        ["model.safetensors", "truncated"])
flipped = bytearray(ck["model.safetensors"])
flipped[-5] ^= 1
ck_case("model_bit_flip", {"model.safetensors": bytes(flipped)}, ["model.safetensors", "CRC-32"])
# Damage that the CRC-32 does not catch (the manifest written to match): the safetensors reader must.
hostile_model = with_length(3 * 10**9)
ck_case("model_header_gigabytes_crc_matching",
        {"model.safetensors": hostile_model,
         MAN: manifest({"model.safetensors": hostile_model, "state.safetensors": ck["state.safetensors"],
                        "state.json": ck["state.json"]})},
        ["model.safetensors", '"header length"'])
RESUME = TRAIN + "--resume {case}/" + CK
for name, state in [("state_json_not_json", b"{not json"), ("state_json_array", b"[1, 2]"),
                    ("state_json_wrong_types", b'{"format": "tandem-train-state", "version": 1, '
                                               b'"model": 5, "step": "x"}')]:
    files = {**ck, "state.json": state}
    files[MAN] = manifest({n: files[n] for n in ("model.safetensors", "state.safetensors",
                                                 "state.json")})
    ck_case(name, files, ["state.json"], command=RESUME)

# --- config files (tandem train --config) ---------------------------------------------------
def config_case(name, text, needles, ext="json", status=2):
    file = "config." + ext
    command = "train --model mlp --data synthetic:4:3:8 --max-steps 1 --out {work}/run --config "
    case("config/" + name, {file: text}, command + "{case}/" + file, [file] + needles, status)


config_case("valid_json", b'{"batch_size": 4, "lr": 0.05, "deterministic": true}\n', [], status=0)
config_case("valid_toml", b"[train]\nbatch_size = 4\nlr = 0.05\n", [], "toml", status=0)
good_json = b'{"batch_size": 4, "lr": 0.05, "optimizer": "adam"}'
for cut in (0, 1, 15, len(good_json) - 1):
    config_case("json_cut_at_%d" % cut, good_json[:cut], ["JSON"])
for name, text, needles in [
        ("json_array", b"[1, 2]", ["object"]),
        ("json_unknown_key", b'{"batchsize": 4}', ["batchsize"]),
        ("json_batch_size_zero", b'{"batch_size": 0}', ["--batch-size"]),
        ("json_batch_size_2_pow_63", b'{"batch_size": 9223372036854775808}', ["--batch-size"]),
        ("json_batch_size_float", b'{"batch_size": 1e300}', ["--batch-size"]),
        ("json_batch_size_text", b'{"batch_size": "many"}', ["--batch-size", "many"]),
        ("json_lr_nan_text", b'{"lr": "nan"}', ["--lr", "nan"]),
        ("json_lr_negative", b'{"lr": -0.1}', ["--lr"]),
        ("json_epochs_negative", b'{"epochs": -5}', ["--epochs"]),
        ("json_workers_billion", b'{"workers": 1000000000}', ["--workers"]),
        ("json_momentum_1_5", b'{"momentum": 1.5}', ["--momentum"]),
        ("json_seed_negative", b'{"seed": -1}', ["--seed"]),
        ("json_object_value", b'{"model": {"name": "mlp"}}', ["'model'", "object"]),
        ("json_nested_deeply", b'{"model": ' + b"[" * 100000 + b"]" * 100000 + b"}", ["'model'"]),
        ("json_nul_byte", b'{"model": "ml\x00p"}', ["JSON"])]:
    config_case(name, text, needles)
for name, text, needles in [
        ("toml_cut", b"[train]\nbatch_size = ", ["TOML", "line 2"]),
        ("toml_not_toml", b"{\"batch_size\": 4}", ["TOML", "line 1"]),
        ("toml_lr_nan", b"lr = nan\n", ["--lr", "nan"]),
        ("toml_lr_inf", b"lr = inf\n", ["--lr", "inf"]),
        ("toml_batch_size_int64_max", b"batch_size = 9223372036854775807\nepochs = 0\n", ["--epochs"]),
        ("toml_integer_overflow", b"batch_size = 9223372036854775808\n", ["TOML", "line 1"]),
        ("toml_date", b"epochs = 1979-05-27\n", ["'epochs'", "type"]),
        ("toml_array", b"model = [1, 2]\n", ["'model'", "type"]),
        ("toml_nested_deeply", b"model = " + b"[" * 1000 + b"]" * 1000 + b"\n", ["TOML", "depth"]),
        ("toml_unknown_key", b"[train]\nbatchsize = 4\n", ["batchsize"])]:
    config_case(name, text, needles, "toml")


def main():
    shutil.rmtree(FILES, ignore_errors=True)
    with open(os.path.join(HERE, "cases.tsv"), "w") as table:
        table.write("# case\tstatus\tcommand\tneedles (generated by make_hostile.py)\n")
        for name, status, command, needles, files in cases:
            for rel, data in files.items():
                path = os.path.join(FILES, name, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as out:
                    out.write(data)
            os.makedirs(os.path.join(FILES, name), exist_ok=True)
            table.write("%s\t%d\t%s\t%s\n" % (name, status, command, "|".join(needles)))
    print("%d cases in %s" % (len(cases), FILES))


if __name__ == "__main__":
    main()
