package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/aicdb/aicdb/queueing"
)

// Distributions are the steady TTFT and ITL distributions of one side.
type Distributions struct {
	TTFT, ITL queueing.Distribution
}

// PointDistributions runs one closed-loop configuration on both sides, driven as
// the gate drives its families (the model's steady windows, stagger phases and
// client round trip given to the DES), and returns each side's steady TTFT and ITL
// distributions: the oracle curve beside the model's in `aicdb plot cdf --oracle`.
// f needs no name or tolerance; an open loop (Concurrency ≤ 0) is refused.
func PointDistributions(ctx context.Context, f Family) (model, des Distributions, err error) {
	if f.Spec.Concurrency <= 0 {
		return model, des, errors.New("oracle distributions: only closed-loop points (concurrency > 0) are simulated")
	}
	_, rep, err := runModel(ctx, f)
	if err != nil {
		return model, des, err
	}
	model = Distributions{TTFT: rep.TTFTSteady, ITL: rep.ITL}
	groups, _, err := oracleClosedRuns(ctx, f, rep, shapeOf(f.Spec))
	if err != nil {
		return model, des, fmt.Errorf("oracle: %w", err)
	}
	if des.TTFT, des.ITL, err = steadyDistributions(groups); err != nil {
		return model, des, fmt.Errorf("oracle: %w", err)
	}
	return model, des, nil
}
