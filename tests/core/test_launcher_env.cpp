// The launcher-environment reader (core/launcher_env.h, issue 50) over hand-set environments: torchrun's,
// Slurm's and Open MPI's variables, the precedence between them, and malformed values (one-line errors).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/errors.h"
#include "core/launcher_env.h"

namespace vispco {
namespace {

using Env = std::map<std::string, std::string>;

LauncherEnv read(const Env& env) {
  return read_launcher_env([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The message of the InvalidArgument that reading `env` throws ("" when it does not throw).
std::string error_of(const Env& env) {
  try {
    read(env);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(LauncherEnv, NothingSetIsOneProcess) {
  const LauncherEnv e = read({{"HOME", "/root"}});
  EXPECT_EQ(e, LauncherEnv{});
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.launcher, "");
}

TEST(LauncherEnv, TorchrunVariables) {
  const LauncherEnv e = read({{"RANK", "5"},
                              {"WORLD_SIZE", "8"},
                              {"LOCAL_RANK", "1"},
                              {"MASTER_ADDR", "10.0.0.7"},
                              {"MASTER_PORT", "29500"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_TRUE(e.distributed());
}

TEST(LauncherEnv, WorldOfOneNeedsNoMaster) {
  const LauncherEnv e = read({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.master_port, 0);
}

TEST(LauncherEnv, SlurmAndOpenMpiVariables) {
  const LauncherEnv s = read({{"SLURM_PROCID", "3"},
                              {"SLURM_NTASKS", "4"},
                              {"SLURM_LOCALID", "1"},
                              {"MASTER_ADDR", "node01"},
                              {"MASTER_PORT", "12345"}});
  EXPECT_EQ(s.launcher, "slurm");
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.master_addr, "node01");
  const LauncherEnv m = read({{"OMPI_COMM_WORLD_RANK", "2"},
                              {"OMPI_COMM_WORLD_SIZE", "3"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", "1"}});
  EXPECT_EQ(m.launcher, "openmpi");
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.world_size, 3);
  EXPECT_EQ(m.local_rank, 0);
  EXPECT_EQ(m.master_port, 1);
}

TEST(LauncherEnv, TorchrunInsideASlurmJobWins) {
  // torchrun started by an sbatch script: Slurm's one task, torchrun's several workers.
  const LauncherEnv e = read({{"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "1"},
                              {"RANK", "2"},
                              {"WORLD_SIZE", "4"},
                              {"LOCAL_RANK", "2"},
                              {"MASTER_ADDR", "h"},
                              {"MASTER_PORT", "29500"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
}

TEST(LauncherEnv, EmptyVariablesCountAsUnset) {
  EXPECT_EQ(read({{"RANK", ""}, {"WORLD_SIZE", ""}}), LauncherEnv{});
}

TEST(LauncherEnv, MalformedValuesAreOneLineErrors) {
  const Env good = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  const auto with = [&](const std::string& k, const std::string& v) {
    Env e = good;
    e[k] = v;
    return e;
  };
  const auto without = [&](const std::string& k) {
    Env e = good;
    e.erase(k);
    return e;
  };
  EXPECT_EQ(error_of(good), "");
  EXPECT_EQ(error_of(with("RANK", "x")),
            "launcher environment: RANK='x' is not a whole number in [0, 1000000]");
  EXPECT_EQ(error_of(with("RANK", "-1")),
            "launcher environment: RANK='-1' is not a whole number in [0, 1000000]");
  EXPECT_EQ(error_of(with("RANK", "2")), "launcher environment: RANK=2 is outside [0, WORLD_SIZE=2)");
  EXPECT_EQ(error_of(with("WORLD_SIZE", "0")),
            "launcher environment: WORLD_SIZE='0' is not a whole number in [1, 1000000]");
  EXPECT_EQ(error_of(with("WORLD_SIZE", "2 ")),
            "launcher environment: WORLD_SIZE='2 ' is not a whole number in [1, 1000000]");
  EXPECT_EQ(error_of(with("LOCAL_RANK", "1.5")),
            "launcher environment: LOCAL_RANK='1.5' is not a whole number in [0, 1000000]");
  EXPECT_EQ(error_of(with("MASTER_PORT", "65536")),
            "launcher environment: MASTER_PORT='65536' is not a whole number in [1, 65535]");
  EXPECT_EQ(error_of(with("MASTER_PORT", "0")),
            "launcher environment: MASTER_PORT='0' is not a whole number in [1, 65535]");
  EXPECT_EQ(error_of(without("WORLD_SIZE")),
            "launcher environment: WORLD_SIZE is not set (set together with RANK)");
  EXPECT_EQ(error_of(without("RANK")),
            "launcher environment: RANK is not set (set together with WORLD_SIZE)");
  EXPECT_NE(error_of(without("MASTER_ADDR")).find("MASTER_ADDR is not set"), std::string::npos);
  EXPECT_EQ(error_of(without("MASTER_PORT")),
            "launcher environment: MASTER_PORT is not set (the TCP port of rank 0's c10d store)");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "many"}}),
            "launcher environment: SLURM_NTASKS='many' is not a whole number in [1, 1000000]");
  for (const Env& e : {with("RANK", "x"), without("MASTER_ADDR"), with("MASTER_PORT", "99999")})
    EXPECT_EQ(error_of(e).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace vispco
