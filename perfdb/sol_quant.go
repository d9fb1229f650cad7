package perfdb

import "fmt"

// ComputeDtype is the tensor-core pipeline a quant mode runs on; it selects
// the system's <dtype>_tc_flops (Rust common/enums.rs ComputeDtype).
type ComputeDtype uint8

// Compute dtypes. ComputeNone marks memory-only modes (KV cache, comm).
const (
	ComputeNone ComputeDtype = iota
	ComputeBF16
	ComputeInt8
	ComputeFP8
	ComputeFP4
)

// QuantMapping is aiconfigurator's QuantMapping: Memory is bytes per
// element, Compute the tensor-core FLOPS multiplier relative to bf16.
type QuantMapping struct {
	Memory  float64
	Compute float64
	Dtype   ComputeDtype
}

// GemmQuant is a GEMM quant mode, spelled as the gemm_dtype column.
type GemmQuant string

// GEMM quant modes (common.GEMMQuantMode).
const (
	GemmBF16       GemmQuant = "bfloat16"
	GemmInt8WO     GemmQuant = "int8_wo"
	GemmInt4WO     GemmQuant = "int4_wo"
	GemmFP8        GemmQuant = "fp8"
	GemmFP8Static  GemmQuant = "fp8_static"
	GemmSQ         GemmQuant = "sq"
	GemmFP8Block   GemmQuant = "fp8_block"
	GemmFP8OOTB    GemmQuant = "fp8_ootb"
	GemmNVFP4      GemmQuant = "nvfp4"
	GemmNVFP4WO    GemmQuant = "nvfp4_wo"
	GemmW4A16NVFP4 GemmQuant = "w4a16_nvfp4"
)

// Mapping returns the byte/compute factors of the mode, or an error naming it.
func (q GemmQuant) Mapping() (QuantMapping, error) {
	switch q {
	case GemmBF16:
		return QuantMapping{2, 1, ComputeBF16}, nil
	case GemmInt8WO:
		return QuantMapping{1, 1, ComputeBF16}, nil
	case GemmInt4WO:
		return QuantMapping{0.5, 1, ComputeBF16}, nil
	case GemmFP8, GemmFP8Static, GemmFP8Block, GemmFP8OOTB:
		return QuantMapping{1, 2, ComputeFP8}, nil
	case GemmSQ:
		return QuantMapping{1, 2, ComputeInt8}, nil
	case GemmNVFP4:
		return QuantMapping{9.0 / 16.0, 4, ComputeFP4}, nil
	case GemmNVFP4WO, GemmW4A16NVFP4:
		return QuantMapping{9.0 / 16.0, 1, ComputeBF16}, nil
	}
	return QuantMapping{}, fmt.Errorf("gemm quant %q: unknown; use bfloat16, fp8, fp8_block, fp8_static, nvfp4, int8_wo, int4_wo, sq, …", string(q))
}

// tableName is the gemm_dtype the table is keyed by (fp8_static reads fp8).
func (q GemmQuant) tableName() string {
	if q == GemmFP8Static {
		return string(GemmFP8)
	}
	return string(q)
}

// MoEQuant is a MoE quant mode, spelled as the moe_dtype column.
type MoEQuant string

// MoE quant modes (common.MoEQuantMode).
const (
	MoEBF16                 MoEQuant = "bfloat16"
	MoEFP8                  MoEQuant = "fp8"
	MoEInt4WO               MoEQuant = "int4_wo"
	MoEFP8Block             MoEQuant = "fp8_block"
	MoEW4AFP8               MoEQuant = "w4afp8"
	MoENVFP4                MoEQuant = "nvfp4"
	MoENVFP4WO              MoEQuant = "nvfp4_wo"
	MoEW4A16MXFP4           MoEQuant = "w4a16_mxfp4"
	MoEW4A8MXFP4MXFP8       MoEQuant = "w4a8_mxfp4_mxfp8"
	MoEW4A8MXFP4MXFP8TRTLLM MoEQuant = "w4a8_mxfp4_mxfp8_trtllm"
	MoEW4A16MXFP4Cutlass    MoEQuant = "w4a16_mxfp4_cutlass"
	MoEW4A16NVFP4           MoEQuant = "w4a16_nvfp4"
)

// Mapping returns the byte/compute factors of the mode, or an error naming it.
func (q MoEQuant) Mapping() (QuantMapping, error) {
	switch q {
	case MoEBF16:
		return QuantMapping{2, 1, ComputeBF16}, nil
	case MoEFP8, MoEFP8Block:
		return QuantMapping{1, 2, ComputeFP8}, nil
	case MoEInt4WO, MoEW4A16MXFP4, MoEW4A16MXFP4Cutlass:
		return QuantMapping{0.5, 1, ComputeBF16}, nil
	case MoEW4AFP8, MoEW4A8MXFP4MXFP8, MoEW4A8MXFP4MXFP8TRTLLM:
		return QuantMapping{0.5, 2, ComputeFP8}, nil
	case MoENVFP4:
		return QuantMapping{9.0 / 16.0, 4, ComputeFP4}, nil
	case MoENVFP4WO, MoEW4A16NVFP4:
		return QuantMapping{9.0 / 16.0, 1, ComputeBF16}, nil
	}
	return QuantMapping{}, fmt.Errorf("moe quant %q: unknown; use bfloat16, fp8, fp8_block, nvfp4, w4a16_mxfp4, …", string(q))
}

// FMHAQuant is an attention-compute quant mode (attn_dtype column).
type FMHAQuant string

// FMHA quant modes (common.FMHAQuantMode).
const (
	FMHABF16     FMHAQuant = "bfloat16"
	FMHAFP8      FMHAQuant = "fp8"
	FMHAFP8Block FMHAQuant = "fp8_block"
)

// Mapping returns the byte/compute factors of the mode, or an error naming it.
func (q FMHAQuant) Mapping() (QuantMapping, error) {
	switch q {
	case FMHABF16:
		return QuantMapping{2, 1, ComputeBF16}, nil
	case FMHAFP8, FMHAFP8Block:
		return QuantMapping{1, 2, ComputeFP8}, nil
	}
	return QuantMapping{}, fmt.Errorf("fmha quant %q: unknown; use bfloat16, fp8 or fp8_block", string(q))
}

// KVQuant is a KV-cache quant mode (kv_cache_dtype column).
type KVQuant string

// KV-cache quant modes (common.KVCacheQuantMode).
const (
	KVBF16 KVQuant = "bfloat16"
	KVInt8 KVQuant = "int8"
	KVFP8  KVQuant = "fp8"
)

// Mapping returns the byte factor of the mode, or an error naming it.
func (q KVQuant) Mapping() (QuantMapping, error) {
	switch q {
	case KVBF16:
		return QuantMapping{2, 0, ComputeNone}, nil
	case KVInt8, KVFP8:
		return QuantMapping{1, 0, ComputeNone}, nil
	}
	return QuantMapping{}, fmt.Errorf("kv cache quant %q: unknown; use bfloat16, fp8 or int8", string(q))
}

// CommQuant is a collective-communication quant mode.
type CommQuant string

// Comm quant modes (common.CommQuantMode). "half" is the nccl_dtype of bf16/fp16.
const (
	CommHalf CommQuant = "half"
	CommInt8 CommQuant = "int8"
	CommFP8  CommQuant = "fp8"
)

// Mapping returns the byte factor of the mode, or an error naming it.
func (q CommQuant) Mapping() (QuantMapping, error) {
	switch q {
	case CommHalf:
		return QuantMapping{2, 0, ComputeNone}, nil
	case CommInt8, CommFP8:
		return QuantMapping{1, 0, ComputeNone}, nil
	}
	return QuantMapping{}, fmt.Errorf("comm quant %q: unknown; use half, int8 or fp8", string(q))
}
