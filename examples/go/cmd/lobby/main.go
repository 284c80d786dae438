// Command lobby plays whole matches against a rules service, as a lobby does: the bot plays
// both seats, each move a SuggestMove then an Apply with expected_seq, over one channel with
// the published service config. It prints one JSON line of what it did and exits 1 if any
// call failed or a match did not end. The Kubernetes tests run it against the chart's Service.
//
//	go run ./cmd/lobby -target 198.18.1.10:50051 -service-config ../../deploy/grpc-service-config.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"example.com/basra-rules/lobby/pb/basra/v1"
	"example.com/basra-rules/lobby/rules"
)

// maxPlays bounds a match: far more plays than any match takes (48 a hand).
const maxPlays = 48 * 40

type summary struct {
	Matches  int    `json:"matches"`
	Finished int    `json:"finished"`
	Calls    int    `json:"calls"`
	Error    string `json:"error,omitempty"`
}

func main() {
	target := flag.String("target", "127.0.0.1:50051", "the rules service, host:port")
	config := flag.String("service-config", "", "the published service config (deploy/grpc-service-config.json)")
	matches := flag.Int("matches", 1, "matches to play, one after another")
	seed := flag.String("seed", "go-lobby", "seed prefix; match i is dealt from SEED-i")
	flag.Parse()
	done := play(*target, *config, *matches, *seed)
	line, _ := json.Marshal(done)
	fmt.Println(string(line))
	if done.Error != "" || done.Finished != *matches {
		os.Exit(1)
	}
}

func play(target, config string, matches int, seed string) summary {
	done := summary{Matches: matches}
	client, err := rules.Dial(target, rules.Options{ServiceConfig: config})
	if err != nil {
		done.Error = err.Error()
		return done
	}
	defer client.Close()
	ctx := context.Background()
	levels := [2]basrav1.BotLevel{basrav1.BotLevel_BOT_LEVEL_STRONG, basrav1.BotLevel_BOT_LEVEL_GREEDY}
	for i := 0; i < matches; i++ {
		match, _, err := client.Start(ctx, []byte(fmt.Sprintf("%s-%d", seed, i)), "go-a", "go-b")
		done.Calls++
		if err != nil {
			done.Error = fmt.Sprintf("match %d NewMatch: %v", i, err)
			return done
		}
		for plays := 0; match.State().GetStatus() == basrav1.Status_STATUS_IN_PROGRESS; plays++ {
			if plays == maxPlays {
				done.Error = fmt.Sprintf("match %d is not over after %d plays", i, plays)
				return done
			}
			_, _, err := match.Autoplay(ctx, levels[match.State().GetToMove()])
			done.Calls += 2
			if err != nil {
				done.Error = fmt.Sprintf("match %d play %d: %v", i, plays, err)
				return done
			}
		}
		done.Finished++
	}
	return done
}
