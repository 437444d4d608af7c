// embedlab-cli: the engine, headless. Exit codes: 0 success, 2 bad input (one
// line on stderr naming the file and the problem), 1 internal error, 130 cancelled.
#include <cstdlib>

#include "fork_server.hpp"
#include "process_main.hpp"

int main(int argc, char** argv)
{
    // Set only by the tests' client (tests/cli_fork_client.hpp): serve forked runs.
    if (const char* socket = std::getenv(embedlab::cli::kForkServerVariable))
        return embedlab::cli::serve_forked_runs(socket);
    return embedlab::cli::run_cli_process(argc, argv);
}
