// The LLE neighbour graph (METHODS 2): every token on a 2-D map (the embedding's
// first two principal components, or a t-SNE over a sample of tokens with the
// rest placed at the mean of their nearest sampled tokens), coloured by a chosen
// column (rare tokens' reconstruction cosine, frequency in the text, rare/common,
// or per-token values such as a run's damage), drawn in order of that column with
// the worst on top, optionally over a density image of every token; clicking (or
// searching) a rare token draws edges to its k common neighbours, width by LLE
// weight, with haloed labels placed so they never overlap (greedy, in the order
// selected token, then by |weight|; a label with no free place is hidden). Search
// highlights any token, common ones too. A box or lasso drag selects tokens,
// listed beside the map and exported as CSV. Right: histogram of the rare rows'
// reconstruction cosines. Points are a handful of scatter graphs and curves plus
// one image (no per-point items), so 150k tokens stay interactive; markers shrink
// with the figure. The coordinates and the selection export as CSV.
#pragma once

#include <QPointF>
#include <QPolygonF>
#include <QString>
#include <QStringList>
#include <QVector>
#include <utility>

#include "plot_view.hpp"

class QCPAxisRect;
class QCPColorMap;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QSpinBox;
class QCPBars;
class QCPCurve;
class QCPItemLine;
class QCPItemText;
class QCPTextElement;
class QCPColorScale;
class QLabel;
class QLineEdit;
class QMouseEvent;
class QTabWidget;
class QTableWidget;
class QToolButton;

namespace embedlab::views {

struct NeighbourGraphData {
    QString label;
    QVector<double> x, y;      // all V tokens, PC 1 and PC 2
    QVector<int> common, rare; // token ids
    int k = 0;
    QVector<int> neighbours;          // [rare.size(), k] common ids, best first
    QVector<double> weights;          // [rare.size(), k] LLE weights (sum to 1 per row)
    QVector<double> neighbour_cosine; // [rare.size(), k] cos(rare row, neighbour row); may be empty
    QVector<double> cosine;           // per rare token: rebuilt vs original
    QVector<double> histogram;        // counts of `cosine` in equal bins over [hist_lo, 1]
    double hist_lo = 0;
    QStringList tokens;        // V texts (may be empty)
    QVector<double> frequency; // per token: occurrences in the frequency text (may be empty)
};

// A 2-D map other than the PCA of NeighbourGraphData::x, y (a t-SNE over a sample).
struct NeighbourMapLayout {
    QString name;         // "t-SNE": the axes are "<name> 1" and "<name> 2"
    QVector<double> x, y; // every token
    QVector<int> sample;  // the tokens the layout was fitted on (the rest placed); empty: all
    QString parameters;   // shown beside the chooser: perplexity, iterations, seed, ...
};

class NeighbourGraphView : public DataPlotView<NeighbourGraphData> {
    Q_OBJECT
public:
    enum ColourBy { Cosine, Frequency, RareCommon, Values };
    enum DragMode { Pan, Box, Lasso };

    explicit NeighbourGraphView(QWidget* parent = nullptr);
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    QCPAxisRect* histogramRect() const { return hist_rect_; }
    int selectedToken() const { return selected_; }       // rare token id, -1: none
    int highlightedToken() const { return highlighted_; } // searched or selected token, -1: none
    QString summary() const;
    // The rare token nearest to a pixel position of the scatter (-1 if none within `radius` px).
    int rareTokenAt(const QPointF& pixel, double radius = 12) const;
    // The colour bar beside the scatter (cosine bands, or the chosen column's).
    QCPColorScale* colourScale() const { return scale_; }
    // The selected token's k neighbours: token (escaped), id, weight, cosine.
    QTableWidget* neighbourList() const { return list_; }
    // Every token's shown coordinates as CSV: id,token,x,y,kind,selected,weight,cosine,
    // frequency,in_box (kind rare, common or other; selected 1 for the chosen token;
    // weight: its LLE weight for the chosen token's neighbours, else empty; cosine: a
    // rare token's reconstruction cosine, else empty; frequency: its count in the
    // text, empty if unknown; in_box: 1 for the box/lasso selection). Tokens escaped
    // as in the labels and quoted. Written to a temporary and renamed (QSaveFile).
    // "" or the problem.
    QString exportCoordinatesCsv(const QString& file) const;
    // Every token coloured by a value per token id instead (a compressed run's damage:
    // KL as target, 1 - cosine), larger worse, in bands by rank (median, 80, 95, 99 %),
    // worst drawn last; NaN (never a target) grey. Joins the colour chooser as `label`
    // and is shown. Empty values: gone from the chooser, the cosine bands again.
    void setTokenValues(const QVector<double>& values, const QString& label);
    // The chosen column's curves in drawing order (the worst last), each in ascending
    // badness; empty while colouring by cosine (graphs 1-5, worst band drawn last).
    const QVector<QCPCurve*>& valueCurves() const { return value_curves_; }
    // Beside the map, pages shown one at a time: "Neighbours" (0, shown when a token is
    // selected), "Selection" (1, shown when a box or lasso selects), then those added here
    // (the window's damage panel).
    void addSidePage(QWidget* pane, const QString& title);
    void showSidePage(int index);

    // The map's controls, as a user sets them.
    QComboBox* colourChooser() const { return colour_; }
    QComboBox* layoutChooser() const { return layout_; }
    QComboBox* dragChooser() const { return drag_; }
    QCheckBox* densityToggle() const { return density_toggle_; }
    // t-SNE's settings, in the "t-SNE settings" button's menu.
    QDoubleSpinBox* perplexitySpin() const { return perplexity_; }
    QSpinBox* iterationsSpin() const { return iterations_; }
    QSpinBox* seedSpin() const { return seed_; }
    QSpinBox* sampleSpin() const { return sample_; }
    // The density image under the points (hidden unless the toggle is on).
    QCPColorMap* densityMap() const { return density_; }
    // A t-SNE (or other) layout for these tokens: joins the layout chooser and is shown.
    // Kept across setData while it has one point per token.
    void setLayout(const NeighbourMapLayout& layout);
    const QVector<double>& shownX() const { return lx_; }
    const QVector<double>& shownY() const { return ly_; }
    QString layoutNote() const;

    // The box or lasso selection: token ids ascending, listed (the first 2,000) in
    // selectionList(); exportSelectionCsv writes every one: id,token,x,y,kind,cosine,
    // frequency,value (value: the colour column's, if any). "" or the problem.
    const QVector<int>& selectedTokens() const { return chosen_; }
    void setSelection(const QVector<int>& ids);
    QTableWidget* selectionList() const { return chosen_list_; }
    QString exportSelectionCsv(const QString& file) const;
    // The tokens whose shown points lie inside `polygon` (plot pixels), ascending.
    QVector<int> tokensInside(const QPolygonF& polygon) const;

public slots:
    bool selectToken(int id); // false (and no change) unless id is rare
    // A token id or any token's exact text: a rare token is selected (true); a common
    // one is highlighted (ring and label) and false returned, saying it is common.
    bool search(const QString& text);
    // Another view's token (the Compare tab's): selected when rare, else said to be
    // common; with no graph yet, selected once one is drawn. True when selected now.
    // `other_run` names a run that is not LLE's (svd rank 32 (tinyllama)): a token the
    // split keeps common is then ringed and the split is said to be LLE's, not that run's.
    bool showToken(int id, const QString& other_run = {});

signals:
    void tokenSelected(int id);
    // The user asked for a t-SNE layout with these parameters (the window runs it as a job).
    void layoutRequested(double perplexity, int iterations, qint64 seed, int sample);

private:
    void draw() override;
    void clicked(QMouseEvent* event);
    void drawSelection();
    void fillNeighbourList();
    void placeLabels(); // after every layout: where the labels go at this size
    void exportCsvInteractively();
    void drawValues(); // the chosen colour column, after every draw
    void drawCosineBands();
    void styleMarkers(); // marker sizes for the axes' size, alpha for the density setting
    void binDensity();   // after every layout while shown
    void showLayout(int index);
    void requestLayout();              // layoutRequested with the spins' parameters
    QToolButton* tsneSettingsButton(); // the t-SNE spins in its menu, their values in its tooltip
    void pressed(QMouseEvent* event);
    void moved(QMouseEvent* event);
    void drawChosen();
    void fillChosenList();
    void exportSelectionInteractively();
    QVector<double> columnValues(int column) const; // per token, NaN where none
    QString columnName(int column) const;

    QCPAxisRect* hist_rect_;
    QCPBars* hist_;
    QLineEdit* search_;
    QLabel* stats_;
    QTabWidget* side_;
    QLabel* list_title_;
    QTableWidget* list_;
    QCPColorScale* scale_;
    QVector<int> rare_slot_;       // token id -> index into rare, -1 for common
    QVector<QCPItemText*> labels_; // the selected token's first, then by |weight|
    QVector<QPointF> label_at_;    // the labelled points, plot coordinates
    // Each label's text whole ("'the' 278 (α 0.22)") and compact ("'the' 278"), tried in turn.
    QVector<std::pair<QString, QString>> label_texts_;
    QVector<QCPItemLine*> leaders_; // from each labelled point to its label, when apart
    QPointF press_;                 // where the mouse went down: a click is a release near it
    int selected_ = -1;
    int highlighted_ = -1;
    int pending_ = -1;                // showToken's id while no graph is drawn
    QString pending_run_;             // and its other_run
    int always_ = 1;                  // labels_ always shown: the selected token, a searched one
    QVector<double> values_;          // setTokenValues'
    QString values_label_;            // what they are ("" : none)
    QVector<QCPCurve*> value_curves_; // curves keep their points' order: the worst on top
    QCPTextElement* scale_label_ = nullptr;
    // The map: the layouts (0: PCA), the shown one's coordinates, the controls.
    QVector<NeighbourMapLayout> layouts_;
    QVector<double> lx_, ly_;
    QComboBox* colour_;
    QComboBox* layout_;
    QComboBox* drag_;
    QCheckBox* density_toggle_;
    QDoubleSpinBox* perplexity_;
    QSpinBox* iterations_;
    QSpinBox* seed_;
    QSpinBox* sample_;
    QLabel* layout_note_;
    QCPColorMap* density_;
    QString density_key_; // ranges and size the image was binned for
    // The box / lasso: the outline while dragging, the chosen tokens and their rings.
    QPolygonF lasso_;
    bool dragging_ = false;
    QCPCurve* outline_;
    QCPCurve* chosen_rings_;
    QCPCurve* highlight_ring_;
    QVector<int> chosen_;
    QLabel* chosen_title_;
    QTableWidget* chosen_list_;
};

} // namespace embedlab::views
