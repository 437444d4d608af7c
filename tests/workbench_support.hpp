// The workbench's test helpers shared by test_app's files (they link embedlab_app).
#pragma once

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "model_summary.hpp"

namespace embedlab::test {

// The window with `model` shown and analysed.
inline void open_shown(app::MainWindow& window, const QString& model)
{
    bool shown = false;
    QObject::connect(&window, &app::MainWindow::modelShown, [&](bool ok) { shown = ok; });
    window.openModel(model);
    ASSERT_TRUE(wait_for([&] { return shown && window.jobs().idle(); }));
}

// The window with the bundled model shown and analysed.
inline void open_bundled(app::MainWindow& window)
{
    open_shown(window, QString::fromStdString(app::default_model()));
}

// A fake Slurm on PATH while it lives (with SLURM_CONF and EMBEDLAB_SWEEP_DIR): sbatch
// appends its arguments to log() and runs each task of --array=A-B here, one after another,
// as a node runs it (stdin /dev/null: the worker takes a closed pipe for a cancel), its
// output where --output and --error say, then prints the array job's id; squeue has
// nothing queued, so each task's state is read from its events, as on a cluster.
class FakeSlurm {
public:
    FakeSlurm() : root_(dir_.path().toStdString()), old_path_(qgetenv("PATH"))
    {
        namespace fs = std::filesystem;
        const fs::path bin = root_ / "bin";
        fs::create_directories(bin);
        const auto script = [&](const char* name, const std::string& body) {
            std::ofstream(bin / name) << "#!/bin/sh\n" << body;
            fs::permissions(bin / name, fs::perms::owner_all);
        };
        script("sbatch", "echo \"$@\" >> '" + log().string() + "'\n" + kSbatchBody);
        script("squeue", "exit 0\n");
        script("scancel", "exit 0\n");
        script("scontrol", "[ \"$1\" = show ] && echo 'MaxArraySize = 1001'\nexit 0\n");
        std::ofstream(root_ / "slurm.conf") << "# the fake cluster's\n";
        qputenv("PATH", QByteArray::fromStdString(bin.string()) + ":" + old_path_);
        qputenv("SLURM_CONF", QByteArray::fromStdString((root_ / "slurm.conf").string()));
        qputenv("EMBEDLAB_SWEEP_DIR", QByteArray::fromStdString(sweeps().string()));
    }
    ~FakeSlurm()
    {
        qputenv("PATH", old_path_);
        qunsetenv("SLURM_CONF");
        qunsetenv("EMBEDLAB_SWEEP_DIR");
    }
    FakeSlurm(const FakeSlurm&) = delete;
    FakeSlurm& operator=(const FakeSlurm&) = delete;

    std::filesystem::path log() const { return root_ / "sbatch.log"; } // one line per sbatch
    std::filesystem::path sweeps() const { return root_ / "sweeps"; }

private:
    // sbatch's body: the positionals come after the options (the script, the cli and the
    // sweep directory).
    static constexpr const char* kSbatchBody = R"sh(for a; do
  case "$a" in
    --array=*) array=${a#--array=}; array=${array%%[%]*} ;;
    --output=*) out=${a#--output=} ;;
    --error=*) err=${a#--error=} ;;
    --*) ;;
    *) set -- "$@" "$a" ;;
  esac
done
while [ $# -gt 3 ]; do shift; done
first=${array%-*}; last=${array#*-}
i=$first
while [ "$i" -le "$last" ]; do
  task_out=$(echo "$out" | sed "s/%a/$i/"); task_err=$(echo "$err" | sed "s/%a/$i/")
  SLURM_ARRAY_TASK_ID=$i SLURMD_NODENAME=fake sh "$1" "$2" "$3" < /dev/null > "$task_out" 2> "$task_err"
  i=$((i + 1))
done
echo 4242
)sh";

    QTemporaryDir dir_;
    std::filesystem::path root_;
    QByteArray old_path_;
};

} // namespace embedlab::test
