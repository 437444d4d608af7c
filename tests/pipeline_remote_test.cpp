// A chain (pipeline.hpp) as a remote job through a real sshd (tests/sshd_fixture.hpp):
// the steps' files are uploaded, and the record is the local run's.
#include <cmath>
#include <fstream>

#include "cli_support.hpp"
#include "embedlab/job.hpp"
#include "embedlab/pipeline_request.hpp"
#include "sshd_fixture.hpp"

namespace pipeline_remote_test {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

TEST(PipelineRemote, AChainRunsOverSshIntoTheLocalRecord)
{
    auto& s = embedlab::test::shared_server();
    REQUIRE_SSHD(s);
    const embedlab::test::TempDir dir;
    const embedlab::test::TextSlices text(20000, 3000);
    OJson job = {{"kind", "compress"},
                 {"model", (fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/tinygpt2-f16").string()},
                 {"eval_text", text.eval},
                 {"pipeline",
                  {{{"method", "trim"}, {"freq_text", text.fit}, {"coverage", 0.99}},
                   {{"method", "quant"}, {"type", "q8_0"}}}}};
    EXPECT_EQ(embedlab::pipeline_input_pointers(job), (std::vector<std::string>{"/pipeline/0/freq_text"}));
    job["out"] = (dir / "local").string();
    const auto local = nlohmann::json::parse(embedlab::run_job(job).dump());
    job["out"] = (dir / "remote").string();
    std::ofstream(dir / "job.json") << job.dump();
    const auto r = embedlab::test::cli(
        {"remote", "run", s.host(), (dir / "job.json").string(), "--ssh-config", s.ssh_config.string(),
         "--remote-cli", EMBEDLAB_CLI_PATH, "--remote-dir", (dir / "remote-cache").string(), "--quiet"});
    const auto remote = embedlab::test::json_of(r);
    ASSERT_TRUE(remote.is_object()) << r.err;
    EXPECT_EQ(remote["summary"]["parameters"], "trim 0.99 → quant q8_0");
    for (const char* key : {"params_before", "params_after", "bytes_before", "bytes_after",
                            "model_bytes_before", "model_bytes_after", "eval_tokens"})
        EXPECT_EQ(remote["summary"][key], local["summary"][key]) << key;
    for (const char* key : {"ppl", "ppl_original", "bits_per_byte", "bits_per_byte_original"})
        EXPECT_NEAR(remote["summary"][key].get<double>(), local["summary"][key].get<double>(),
                    1e-6 * local["summary"][key].get<double>())
            << key;
    EXPECT_EQ(remote["manifest"]["pipeline"]["whole_chain"], local["manifest"]["pipeline"]["whole_chain"]);
    // Inputs are content-addressed: the model, the evaluation text and the step's frequency text.
    EXPECT_EQ(std::distance(fs::directory_iterator(dir / "remote-cache" / "blobs"), fs::directory_iterator()),
              3);
}

} // namespace pipeline_remote_test
