// The compression method panel above the results: the method (pca, svd, tt,
// lle, fourier on the token embedding; flat on the attention values), its
// parameters, optional LoRA recovery, the texts each step reads, and where the
// job runs (this computer, an ssh host or a Slurm cluster). It only collects the
// choice, as the engine's CompressionRequest (experiment_request.hpp) plus a
// RunTarget; the main window fills in the model, checks (embedlab::check_request)
// and queues it. The panel's initial values are the workbench's defaults (rank 32,
// keep 0.5 and k 8, 300 steps, 32 windows of 128 tokens, the first 4096 evaluated
// tokens, ...), not the engine's. The choice persists in QSettings ("method/...")
// as each method's request_json and the target's JSON.
//
// Sweeps (issue 41 item 11): every number box takes a list or a range typed into it
// ("8,16,32", "8:128:8"; CheckedSpinBox, the CLI's grammar), so a sweep needs no
// mode switch: the box is framed in blue, its tooltip lists the values, Run says
// "Run 3", and requests() gives one request per value (every combination when
// several boxes sweep). A sweep is checked value by value like a single number.
#pragma once

#include <QList>
#include <QVariantMap>
#include <QWidget>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyses.hpp"

class QAbstractSpinBox;
class QCheckBox;
class QComboBox;
class QLabel;
class QDoubleSpinBox;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QStackedWidget;

namespace embedlab::app {

class MethodPanel : public QWidget {
    Q_OBJECT
public:
    explicit MethodPanel(QWidget* parent = nullptr);
    ~MethodPanel() override; // saves the choice

    // The registry's methods the panel has a page for, in the registry's order
    // (pca, svd, tt, lle, fourier, flat).
    static QStringList methods();

    void setDimension(int d); // rank range 1..d; quant types whose blocks divide d
    // The chosen method's request: its page's fields, LoRA if ticked (and the method
    // takes it), the texts (an empty box: the bundled sample text's path, so the
    // request is complete), evaluation, divergence and task. No model ("": the
    // window's).
    CompressionRequest request() const;
    // The same with another method (its page's values; an unknown method: the
    // common fields only, for check_request to refuse). Only pca and svd get a rank
    // and only tt an eps.
    CompressionRequest request(const QString& method) const;
    // What Run queues: the chosen method's request, or a sweep's, one per value of
    // each visible field typed as a sweep ("8:128:8", "8,16,32"; several fields: every
    // combination, the first field's values slowest). request() has the boxes' last
    // single numbers. Empty while the sweep is larger than kMaxSweepRuns.
    std::vector<CompressionRequest> requests() const;
    int64_t sweepSize() const; // requests().size() without building them; 1 without a sweep
    static constexpr int64_t kConfirmSweepRuns = 64; // Run asks before queueing more
    static constexpr int64_t kMaxSweepRuns = 4096;   // more is a problem(): a typo
    // Shows a request: its method, the fields of its page, LoRA (for a method that
    // takes it) and the common fields; the bundled sample text shows as an empty box.
    // Other pages keep their values.
    void setRequest(const CompressionRequest& request);
    RunTarget target() const;
    void setTarget(const RunTarget& target);
    // A choice stored by the version before requests (a version-1 session's "method"
    // object, or the old "method/..." settings keys): every page's fields by name, ""
    // texts meaning the bundled sample text. Missing keys leave their boxes alone.
    void setLegacyChoice(const QVariantMap& values);

    QString method() const;
    int rank() const;
    double eps() const;
    void setMethod(const QString& method);
    void setRank(int k);
    void setEps(double eps);
    void setHost(const QString& host); // "" = this computer, "Slurm cluster", or an ssh host

    // The first visible number box holding an out-of-range value (or a sweep with
    // one), a sweep over kMaxSweepRuns, else a Slurm time or partition sbatch would
    // refuse ("" if none): run() refuses while there is one, and the panel shows it
    // in red.
    QString problem() const;
    // A warning that does not stop a run ("" if none): lle with the frequency text
    // also the evaluation text.
    QString note() const;

    // SST-2's GLUE dev set in the project's shared data ("" if not found; sst2_dev_path()).
    static QString sst2DevPath();

    void saveSettings() const;
    void restoreSettings();

public slots:
    void run(); // emits runRequested; a sweep of more than kConfirmSweepRuns asks first

signals:
    void runRequested();
    void methodChanged(const QString& method);

private:
    void showOptionsFor(const QString& method);
    CompressionRequest request(const QString& method, const std::map<std::string, double>& with) const;
    std::vector<std::pair<std::string, QList<double>>> sweptFields() const; // field -> its sweep
    void showRuns();                                                        // "Run 3" for a sweep of 3
    QList<QWidget*> numberBoxes() const;
    std::vector<std::pair<std::string, QAbstractSpinBox*>> fieldBoxes() const; // request field -> box
    QString textOf(const QLineEdit* edit) const; // the box's path, or the bundled sample text's
    void showText(QLineEdit* edit, const std::string& path);
    void showProblem();
    QString slurmProblem() const; // the Slurm time or partition as typed is not one sbatch takes
    void addHost();               // "Add ssh host...": asks for the host and chooses it
    void showNotes();
    QWidget* textRow(const QString& label, QLineEdit* edit, const QString& tooltip);

    QComboBox* method_;
    QStackedWidget* options_; // one page per method
    QSpinBox* rank_;
    QDoubleSpinBox* eps_;
    QDoubleSpinBox* keep_ratio_;
    QSpinBox* neighbours_;
    QComboBox* mlp_;
    QSpinBox* steps_;
    QDoubleSpinBox* remaining_;
    QDoubleSpinBox* target_ratio_; // flat: 0 (off) or the decoder's share to keep
    QCheckBox* no_mlp_;            // flat with a target: keep the MLPs dense
    QComboBox* allocation_;
    QComboBox* quant_type_; // quant: a ggml block type; those whose blocks do not divide d disabled
    QSpinBox* samples_;
    QSpinBox* seqlen_;
    QCheckBox* lora_;
    QCheckBox* divergence_; // also measure KL and top-1 against the original
    QSpinBox* lora_rank_;
    QSpinBox* lora_steps_;
    QComboBox* target_;   // editable: "This computer", "Slurm cluster", ssh hosts, "Add ssh host..."
    QString last_target_; // chosen before "Add ssh host..." (back to it when cancelled)
    QLineEdit* ssh_config_;
    QLineEdit* remote_cli_;
    QLineEdit* slurm_partition_;
    QLineEdit* slurm_time_;
    QSpinBox* slurm_array_limit_;
    QLineEdit* frequency_text_;
    QLineEdit* calibration_text_;
    QLineEdit* train_text_;
    QLineEdit* eval_text_;
    QSpinBox* eval_tokens_;
    QComboBox* task_;      // none, SST-2 dev, an SST-2 file, a multiple-choice JSONL file
    QLineEdit* task_data_; // the chosen file
    QWidget* task_file_row_;
    QSpinBox* task_limit_; // first N examples (0: all)
    QWidget* frequency_row_;
    QWidget* calibration_row_;
    QWidget* train_row_;
    QPushButton* run_;
    QLabel* problem_;
    QLabel* note_;
};

} // namespace embedlab::app
