package measure

import (
	_ "embed"
	"fmt"
)

// campaignsFile is aicdb's built-in deployment file: public benchmark
// campaigns found in aiconfigurator's silicon sample, by rule and by run.
//
//go:embed campaigns/inferencemax.yaml
var campaignsFile []byte

// campaignsName names the built-in deployment file in messages.
const campaignsName = "store/measure/campaigns/inferencemax.yaml"

// Campaigns returns the built-in deployments of known benchmark campaigns
// (campaigns/inferencemax.yaml).
func Campaigns() (Deployment, error) {
	d, err := ParseSidecar(campaignsName, campaignsFile)
	if err != nil {
		return d, fmt.Errorf("built-in campaigns: %w", err)
	}
	return d, nil
}

// WithCampaigns returns d with the campaigns c tried after its own runs and
// rules (entryFor): a run d's runs: or rules: deploy keeps d's entry.
func (d Deployment) WithCampaigns(c Deployment) Deployment {
	d.Campaigns = &c
	return d
}
