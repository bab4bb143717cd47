// Runs the built `attnsel` binary (or another program) as a child process and captures
// its stdout, stderr and exit status (posix_spawn + poll, so a chatty child can never dead-lock on a full pipe).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace attnsel::test {

struct CliResult {
  int exit_code = -1;  ///< the exit status; 128 + signal when the child was killed
  std::string out;
  std::string err;
};

/// The exit status of a usage error (a command line the command cannot take).
inline constexpr int kUsage = 2;

inline std::string cli_path() {
#ifdef ATTNSEL_CLI_PATH
  return ATTNSEL_CLI_PATH;
#else
  return {};
#endif
}

/// Runs the program `path` with `args`, the current environment plus `extra_env`
/// ("NAME=VALUE", later entries win) and ATTNSEL_LOG_LEVEL=off unless given.
inline CliResult run_program(const std::string& path, const std::vector<std::string>& args,
                             const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> argv_s{path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s{"ATTNSEL_LOG_LEVEL=off"};
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  // Later entries win: drop earlier duplicates of a name.
  std::vector<std::string> env_unique;
  for (std::size_t i = 0; i < env_s.size(); ++i) {
    const std::string name = env_s[i].substr(0, env_s[i].find('='));
    bool later = false;
    for (std::size_t j = i + 1; j < env_s.size() && !later; ++j) later = env_s[j].substr(0, env_s[j].find('=')) == name;
    if (!later) env_unique.push_back(env_s[i]);
  }
  std::vector<char*> argv, envp;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (std::string& s : env_unique) envp.push_back(s.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error("posix_spawn " + path + ": " + std::strerror(rc));
  }

  CliResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

/// Runs `attnsel args...` as run_program does.
inline CliResult run_attnsel(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
  return run_program(cli_path(), args, extra_env);
}

}  // namespace attnsel::test
