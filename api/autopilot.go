package api

import "time"

// AutopilotHealth is the body of GET /v1/operator/autopilot/health: the leader's view
// of every server's health (Consul's /v1/operator/autopilot/health, in camelCase).
type AutopilotHealth struct {
	// Healthy is true when every server is healthy.
	Healthy bool `json:"healthy"`
	// FailureTolerance is how many healthy voters may fail before the rest are no quorum.
	FailureTolerance int    `json:"failureTolerance"`
	Leader           string `json:"leader"`
	// Voters are the ids of the voters, sorted.
	Voters  []string              `json:"voters"`
	Servers []AutopilotServer     `json:"servers"`
	Config  AutopilotHealthConfig `json:"config"`
}

// AutopilotServer is one server's health as the leader sees it.
type AutopilotServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	HTTPAddr string `json:"httpAddr"`
	Leader   bool   `json:"leader"`
	Voter    bool   `json:"voter"`
	// Status is leader, voter, non-voter, or promoting (a non-voter waiting for a vote).
	Status  string `json:"status"`
	Healthy bool   `json:"healthy"`
	// LastContact is the time since the leader last heard from the server, as a Go
	// duration ("12ms"; "0s" for the leader), or "never" when it has not since it
	// became leader; LastContactMillis is the same in milliseconds, -1 for never.
	LastContact       string `json:"lastContact"`
	LastContactMillis int64  `json:"lastContactMillis"`
	// LastTerm and LastIndex are the term and index of the last entry the server holds,
	// as far as the leader knows.
	LastTerm  uint64 `json:"lastTerm"`
	LastIndex uint64 `json:"lastIndex"`
	// TrailingLogs is how many of the leader's entries the server lacks.
	TrailingLogs uint64 `json:"trailingLogs"`
	// StableSince is when the server's health last changed (or when the leader began
	// tracking it).
	StableSince time.Time `json:"stableSince"`
	// Reason explains an unhealthy server, a non-voter waiting for a vote, and a dead
	// server the leader removes or keeps.
	Reason string `json:"reason,omitempty"`
	// Version, NewestCommand and Release are the server's build as the leader knows it
	// (Member's fields of the same names).
	Version       string `json:"version,omitempty"`
	NewestCommand uint8  `json:"newestCommand"`
	Release       string `json:"release"`
}

// AutopilotHealthConfig is the autopilot configuration of the leader that answered.
type AutopilotHealthConfig struct {
	CleanupDeadServers      bool   `json:"cleanupDeadServers"`
	LastContactThreshold    string `json:"lastContactThreshold"`
	MaxTrailingLogs         uint64 `json:"maxTrailingLogs"`
	ServerStabilizationTime string `json:"serverStabilizationTime"`
	DeadServerThreshold     string `json:"deadServerThreshold"`
	MinQuorum               int    `json:"minQuorum"`
}
