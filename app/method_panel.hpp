// The compression method panel above the results: a method of the engine's registry
// (embedlab::method_registry(), every method, those registered at run time too), its
// parameters, optional LoRA recovery, the texts each step reads, and where the job runs
// (this computer, an ssh host or a Slurm cluster). It only collects the choice, as the
// engine's CompressionRequest (experiment_request.hpp) plus a RunTarget; the main window
// fills in the model, checks (embedlab::check_request) and queues it.
//
// Each method's page is generated from its registry row (issue 59 item 3): a widget per
// field of MethodDescriptor::fields, by the field's type and doc (FieldDoc): a number
// box (CheckedSpinBox) holding the doc's range (hi_is_width: the model's width, set by
// setDimension; 0 too when the doc has `zero`), a combo box for a field with choices
// (type and store: the ggml types whose blocks do not divide d disabled), a check box
// for a switch, a line edit "8,8,12" for shape and ranks, and the shared frequency and
// calibration text rows for freq_text and calib_text. Each widget is named by its field;
// a field whose doc says `applies_with` is enabled only while that holds (and is at its
// default in the request otherwise). The page's initial values are the method's example
// overlaid by the workbench's defaults (rank 32, eps 0.3, keep 0.5 and k 8, 300 steps,
// remaining 0.5 of 32 windows of 128 tokens, q8_0; method_panel_fields.cpp), else the
// request's defaults; the common rows' are the workbench's too (the first 4096
// evaluated tokens, LoRA r 8 for 100 steps). The choice persists in QSettings
// ("method/...") as each method's request_json and the target's JSON.
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
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyses.hpp"
#include "embedlab/method_registry.hpp"

class QAbstractSpinBox;
class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QDoubleSpinBox;
class QLineEdit;
class QPushButton;
class QScrollArea;
class QSpinBox;
class QStackedWidget;

namespace embedlab::app {

class MethodPanel : public QWidget {
    Q_OBJECT
public:
    explicit MethodPanel(QWidget* parent = nullptr);
    ~MethodPanel() override; // saves the choice

    // The registry's methods, in the registry's order (a panel constructed after a
    // method was registered has its page).
    static QStringList methods();

    // Fields up to d (rank, k, LoRA r) 1..d; ggml types whose blocks divide d; a shape
    // still at its initial value that is not one of d: the most balanced of d.
    void setDimension(int d);
    // The chosen method's request: its page's fields, LoRA if ticked (and the method
    // takes it), the texts (an empty box: the bundled sample text's path, so the
    // request is complete), evaluation, divergence and task. No model ("": the
    // window's).
    CompressionRequest request() const;
    // The same with another method (its page's fields; an unknown method: the
    // common fields only, for check_request to refuse).
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
    // The generated rank box of the chosen method (else pca's), and tt's eps box.
    int rank() const;
    double eps() const;
    void setMethod(const QString& method);
    void setRank(int k); // every page's rank up to d (pca, svd, ...): the spectrum's marker
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

    // What the evaluation is on the loaded model (issue 61 item 6): a decoder's perplexity, an
    // encoder's pseudo-perplexity (a masked-LM head: each token masked in turn), or none (any
    // other encoder): then the evaluation text is disabled, and it and + KL vs original say
    // in their tooltips what applies instead. `model` names the model in them.
    enum class Evaluation { Perplexity, PseudoPerplexity, None };
    void setEvaluation(Evaluation kind, const QString& model);
    Evaluation evaluation() const { return evaluation_; }
    QLineEdit* evaluationText() const { return eval_text_; }
    QCheckBox* divergenceBox() const { return divergence_; }

    // The chain (issue 60). thenMethod(): the step Then... added ("" none); setThen adds
    // one ("" removes it). chainJson(): the pipeline request Run queues while the method
    // is trim or a step is added (model "": the window's), else nullopt; the method step's
    // fields as request() reads them, evaluation fields at the top (a trimmed chain evaluates
    // the whole text: eval_tokens does not apply to it). chainLabel(): the engine's label
    // ("trim 0.999 → pca rank 32 → q8_0"), or the steps' names while refused. chainProblem():
    // the engine's refusal of the chain as built ("" none).
    QString thenMethod() const;
    void setThen(const QString& method);
    std::optional<nlohmann::ordered_json> chainJson() const;
    QString chainLabel() const;
    QString chainProblem() const;
    // Shows a chain as chainJson() gives it (a session's): its method step as setRequest
    // does, trim's boxes (a field the step leaves out: 0 or empty, "not given"), the method
    // and the Then... step. The evaluation token count stays (a chain does not use it).
    // InputError (pipeline_from_json's) for a chain that is not one.
    void setChain(const nlohmann::ordered_json& chain);
    static const QString kTrimStep; // "trim": a chain's step that is no registry method

    // SST-2's GLUE dev set in the project's shared data ("" if not found; sst2_dev_path()).
    static QString sst2DevPath();

    void saveSettings() const;
    void restoreSettings();

public slots:
    void run(); // emits runRequested; a sweep of more than kConfirmSweepRuns asks first

signals:
    void runRequested();
    // Run was pressed while a field is out of range: the reason (problem()), for the status bar.
    void runRefused(const QString& reason);
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

    // A generated page: the widget of each of the method's fields (method_panel_fields.cpp).
    struct FieldWidget {
        std::string field;
        QWidget* widget;
        const FieldDoc* doc;
    };
    struct MethodPage {
        std::string method;
        QWidget* widget;
        std::vector<FieldWidget> fields;
    };
    void buildPages();
    QWidget* fieldWidget(const MethodDescriptor& m, const std::string& field, const FieldDoc& doc,
                         QWidget* page);
    // The widget of a field by its JSON type and first value (fieldWidget's and trim's).
    QWidget* typedFieldWidget(const std::string& field, RequestFieldType type, const FieldDoc& doc,
                              const nlohmann::ordered_json& first, QWidget* page);
    // The chain's widgets (method_panel_chain.cpp): Then..., its step's box and x, the
    // chain in words, and trim's page; trim added to the method box.
    void buildChain(QHBoxLayout* row);
    QString registryStep() const; // the chain's registry method, whose page is shown ("" none)
    bool chainShown() const;      // the method is trim or a step is added
    bool chainTrims() const;      // trim is one of its steps (its page is shown)
    QScrollArea* scrollPage(QWidget* page, const QString& name);
    std::optional<nlohmann::ordered_json> chainSteps(QString* problem) const; // the JSON, or why not
    // A field widget's value as JSON (a text row: its path or the bundled text's; null: unreadable).
    nlohmann::ordered_json fieldValue(const FieldWidget& f, RequestFieldType type) const;
    void showChain();
    const MethodPage* page(const std::string& method) const;
    QWidget* box(const std::string& method, const std::string& field) const; // null if none
    // The page's fields into `r` (sweep values from `with`); the fields whose applies_with
    // does not hold back at their defaults unless `raw`.
    void readPage(const MethodPage& page, CompressionRequest& r, const std::map<std::string, double>& with,
                  bool raw = false) const;
    void showPage(const MethodPage& page, const CompressionRequest& r); // setRequest's part
    void showApplies();                                                 // enable by applies_with
    QString listProblem() const; // a shape or ranks box that is no comma list of integers

    QComboBox* method_;
    QStackedWidget* options_; // one page per method
    std::vector<MethodPage> pages_;
    int dimension_ = 0;
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
    QWidget* eval_row_ = nullptr; // "Evaluate on" with its box and browse button
    Evaluation evaluation_ = Evaluation::Perplexity;
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
    // The chain (method_panel_chain.cpp).
    QPushButton* then_ = nullptr;      // "Then...": adds a step after the chosen method
    QWidget* then_row_ = nullptr;      // "then" [method] [x] while a step is added
    QComboBox* then_method_ = nullptr; // the added step's method
    QLabel* chain_label_ = nullptr;    // the chain in words
    QWidget* trim_page_ = nullptr;     // trim's fields, while trim is a step
    std::vector<FieldWidget> trim_fields_;
};

} // namespace embedlab::app
